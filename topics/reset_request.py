"""The ``ResetWorkflow`` body for a run, built from its history: one place for the SDK and the gateway.

The engine keeps the history of open runs only; a reset of a closed run therefore carries the
run's events up to the branch point, read by the caller from ``{ns}.history`` (the engine checks
them against the run's state before it uses them).
"""

from __future__ import annotations

from typing import Any

from . import serde
from .errors import ResetRejectedError
from .records import CLOSE_EVENTS

__all__ = ["RESET_EVENTS_MAX_BYTES", "reset_body"]

#: a reset of a closed run carries its events in one command record, which must stay under the
#: broker's message size (1 MB by default) with room for the envelope
RESET_EVENTS_MAX_BYTES = 900_000


def reset_body(
    workflow_id: str,
    run_id: str | None,
    events: list[dict[str, Any]],
    *,
    to_event: int | None,
    reason: str,
    identity: str,
    dry_run: bool,
) -> dict[str, Any]:
    """``events``: the run's decoded history, oldest first. ``to_event`` None: the last completed
    workflow task. Raises ``ResetRejectedError`` for what the caller can tell before sending."""
    if to_event is None:
        done = [e["seq"] for e in events if e["attributes"][0] == "WorkflowTaskCompleted"]
        if not done:
            raise ResetRejectedError(
                f"workflow {workflow_id!r} has no completed workflow task to reset to",
                workflow_id=workflow_id,
                run_id=run_id,
            )
        to_event = done[-1]
    kept: list[bytes] = []
    if events and events[-1]["attributes"][0] in CLOSE_EVENTS:
        kept = [serde.encode("HistoryEvent", e) for e in events if e["seq"] <= to_event]
        size = sum(len(b) for b in kept)
        if size > RESET_EVENTS_MAX_BYTES:
            raise ResetRejectedError(
                f"the history of closed run {run_id} up to event {to_event} is {size} bytes, more than a reset "
                f"can carry ({RESET_EVENTS_MAX_BYTES}); reset to an earlier event",
                workflow_id=workflow_id,
                run_id=run_id,
            )
    return {
        "workflow_task_completed_seq": to_event,
        "reason": reason,
        "identity": identity,
        "dry_run": dry_run,
        "kept_events": kept,
    }
