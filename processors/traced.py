"""One command's transition, in a ``kadence.process`` span when the command or its run is traced
(``kadence.topics.tracing``): what the history processor calls for each command of a batch."""

from __future__ import annotations

from typing import Any

from kadence.schemas.records import WorkflowState
from kadence.topics.tracing import Tracer, TraceRef

from .effects import BatchView, Outbox
from .state_machine import transition

__all__ = ["traced_transition"]


def _run_trace(st: WorkflowState | None) -> TraceRef | None:
    """The trace context of a running run that is traced, else None."""
    if st is None or st["status"] != "running":
        return None
    trace_id, span_id = st.get("trace_id"), st.get("span_id")
    if trace_id is None or span_id is None:
        return None
    return trace_id, span_id


def traced_transition(
    tracer: Tracer,
    cmd: dict[str, Any],
    view: BatchView,
    out: Outbox,
    ts: int,
    mark: tuple[int, ...],
    parent: TraceRef | None,
) -> None:
    """``transition``, in a ``kadence.process`` span when the command or its running run is
    traced (``topics.tracing``): a child of the command's context, else of the run's (what a
    timer or timeout causes joins the run's trace). What it writes carries the span's
    context, and a run the command starts (a start, continue-as-new, reset) keeps it. A
    traced query or result request on an untraced run gets its span and leaves the run
    untraced (else one sampled caller would trace the rest of someone else's run).
    ``mark``: the outbox's mark before the command (``Outbox.mark``)."""
    wf = cmd["aggregate_key"]
    st = view.state(wf)
    if parent is None:
        parent = _run_trace(st)
        if parent is None:
            transition(cmd, view, out, ts)  # untraced: the common case costs the look-up above
            return
    run_before = st["run_id"] if st is not None else None
    btype = cmd["body"][0]
    # one attribute: each costs ~10 us a span in the SDK and its exporter (docs/performance.md)
    with tracer.child(f"kadence.process {btype}", parent, {"kadence.workflow_id": wf}) as ref:
        transition(cmd, view, out, ts)
    out.stamp(mark, ref)
    st = view.state(wf)
    if st is not None and st["run_id"] != run_before and st.get("trace_id") is None:
        st["trace_id"], st["span_id"] = ref
