"""Pause and unpause: an operator holds a run still without ending it (the design's "disable").

While a run is paused:

* no workflow task is scheduled (one needed is remembered in ``wt_needed``) and no activity
  attempt is dispatched (the attempt is kept with ``held``); a task already out with a worker
  finishes, and its outcome is recorded;
* no timer fires: a timer-service firing (user timers, retry backoff, workflow-task retry, run
  and execution timeouts) is kept in ``held_timers``; the activity deadlines the processor keeps
  itself are not armed (``processors.deadlines``);
* everything that only records goes on: signals, activity results, heartbeats, cancel requests,
  updates' validation and acceptance, queries, terminate.

Unpausing dispatches the held attempts (their start-to-close time starts then), fires the held
timers in the order they fell due, and schedules the workflow task that was needed. Both
commands are deduplicated by request ID like every other operation, and pausing a paused run
(or unpausing a running one) is answered ok and records nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, cast

from kadence.schemas.records import FireTimer, PauseWorkflow, WorkflowState

from .activities import dispatch_attempt
from .deadlines import LOCAL_KINDS
from .effects import Transition, emit, open_run_or_reply, remember, reply, schedule_workflow_task

__all__ = ["hold_timer", "pause_workflow", "unpause_workflow"]

log = logging.getLogger(__name__)


def hold_timer(st: WorkflowState, body: Mapping[str, Any]) -> bool:
    """Keep a firing of the paused run ``st`` for its unpause; False when nothing is kept (a
    deadline the processor derives from the state again at unpause, or one already held)."""
    if body["kind"] in LOCAL_KINDS:
        return False
    key = (body["timer_id"], body["kind"], body["attempt"])
    if any((t["timer_id"], t["kind"], t["attempt"]) == key for t in st["held_timers"]):
        return False
    st["held_timers"].append(cast(FireTimer, dict(body)))
    return True


def pause_workflow(t: Transition, body: PauseWorkflow) -> None:
    st = open_run_or_reply(t)
    if st is None:
        return
    wf, rid = t.cmd["aggregate_key"], t.cmd["request_id"]
    if st["paused"]:
        message = "the run was paused already"
    else:
        emit(t, st, "WorkflowExecutionPaused", {"reason": body["reason"], "identity": body["identity"]}, request_id=rid)
        st["paused"] = True
        message = ""
        log.warning("audit: workflow %s run %s paused by %s", wf, st["run_id"], body["identity"] or "unknown")
    remember(st, rid, "ok")
    t.view.put(st)
    reply(t.out, rid, wf, "ok", run_id=st["run_id"], message=message)


def unpause_workflow(
    t: Transition, body: dict[str, Any], *, fire: Callable[[Transition, WorkflowState, Mapping[str, Any]], bool]
) -> None:
    """``fire(t, st, timer_body)``: the state machine's firing of a due timer."""
    st = open_run_or_reply(t)
    if st is None:
        return
    wf, rid = t.cmd["aggregate_key"], t.cmd["request_id"]
    if not st["paused"]:
        remember(st, rid, "ok")
        t.view.put(st)
        reply(t.out, rid, wf, "ok", run_id=st["run_id"], message="the run was not paused")
        return
    emit(t, st, "WorkflowExecutionUnpaused", {"reason": body["reason"], "identity": body["identity"]}, request_id=rid)
    remember(st, rid, "ok")  # before a held timeout can close a cron run into the next (which copies it)
    st["paused"] = False
    for a in st["pending_activities"]:
        if a["held"]:
            dispatch_attempt(t, st, a)
    held, st["held_timers"] = sorted(st["held_timers"], key=lambda timer: timer["fire_at_ms"]), []
    for timer in held:
        if st["status"] != "running":
            break  # a run or execution timeout closed it: nothing fires after a close
        if not fire(t, st, timer):
            t.out.stale += 1
    if st["status"] == "running" and st["wt_needed"] and st["wt_scheduled_seq"] is None:
        # with the whole history: a worker's cached instance may have run an eager task the
        # engine refused while the run was paused
        schedule_workflow_task(t, st, full=True)
    log.warning(
        "audit: workflow %s run %s unpaused by %s (%d timers held)",
        wf,
        st["run_id"],
        body["identity"] or "unknown",
        len(held),
    )
    if st["continued_run_id"] is None:  # else the next run's state is already staged
        t.view.put(st)
    reply(t.out, rid, wf, "ok", run_id=st["run_id"])
