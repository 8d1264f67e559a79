"""Debounced starts (decision 0059): a start with ``debounce_ms`` creates its run at once, but the
run's code waits ``debounce_ms``; another debounced start of the same workflow ID in that time
joins the run instead of conflicting with it: the run gets that start's input and waits
``debounce_ms`` again from it (never past its first start plus ``debounce_max_ms``). So a burst
of starts gives one run, after the last of them, with the last input; every start of the burst
is answered with the same run ID, and each is an event of the run's history
(``WorkflowStartDebounced``), so the run replays with the input it ran with.

The wait is the run's first-task time (``first_task_at_ms``, shared with a cron run's time and a
rate limit's admission: the latest of them applies) on a ``cron_start`` timer; a timer that fires
before the time moved on changes nothing (``state_machine.fire_timer``)."""

from __future__ import annotations

from kadence.schemas.records import StartWorkflow, WorkflowState

from .effects import Transition, emit, start_timer

__all__ = ["begin_debounce", "join_debounce", "joins_debounce"]


def _starts_at(st: WorkflowState, body: StartWorkflow, ts: int) -> int:
    at = ts + body["debounce_ms"]
    deadline = st.get("debounce_deadline_ms")
    return at if deadline is None else min(at, deadline)


def begin_debounce(t: Transition, st: WorkflowState, body: StartWorkflow) -> None:
    """A new run started with a debounce: its code waits (``runs.begin_run`` arms the timer)."""
    if not body.get("debounce_ms"):
        return
    max_ms = body.get("debounce_max_ms") or 0
    st["debounce_deadline_ms"] = t.ts + max_ms if max_ms else None
    at = _starts_at(st, body, t.ts)
    st["debounce_until_ms"] = at
    st["first_task_at_ms"] = max(at, st.get("first_task_at_ms") or 0)


def joins_debounce(st: WorkflowState | None, body: StartWorkflow) -> bool:
    """Does this start join the workflow's run (a debounced start, the run still waiting)?"""
    return (
        bool(body.get("debounce_ms"))
        and st is not None
        and st["status"] == "running"
        and st.get("debounce_until_ms") is not None
    )


def join_debounce(t: Transition, st: WorkflowState, body: StartWorkflow, request_id: str | None) -> None:
    """Record the start in the waiting run: its input from now on, its code's new time."""
    at = _starts_at(st, body, t.ts)
    begins = max(at, st.get("throttled_until_ms") or 0)
    st["debounce_until_ms"], st["first_task_at_ms"] = at, begins
    emit(t, st, "WorkflowStartDebounced", {"input": body["input"], "starts_at_ms": at}, request_id=request_id)
    start_timer(t.out, st, f"debounce.{st['run_id']}.{st['next_seq']}", begins, "cron_start")
