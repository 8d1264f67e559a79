"""Reset: a new run that branches from a ``WorkflowTaskCompleted`` event of the open run.

The new run's history is the old run's events before that completion (the start, the decisions
before it and every result that had arrived), followed by a fresh workflow task, so the
workflow's current code decides again from that point. The old run is terminated with a reason
that names the new run, and the new run's start event names the old run (the branch).

Policy for what was pending at the branch point (explicit, and checked before anything changes):

* activities scheduled before the point without a result before it run again in the new run
  (attempt 1; their idempotency key names the new run);
* timers started before the point and not fired keep their original fire time;
* child workflows: a reset across a started child is refused (the child would be orphaned or
  started twice); reset to a point before the child was started instead;
* signals received after the point are not carried over (resend them if they still matter).
"""

from __future__ import annotations

import logging
import uuid

from .activities import _dispatch_attempt
from .effects import (BatchView, Outbox, close_run, emit, open_run_or_reply, remember, reply,
                      schedule_workflow_task, start_timer)

__all__ = ["reset_workflow"]

log = logging.getLogger(__name__)

_RESET_NS = uuid.UUID("0f5a2c1e-7d43-4f7a-9b8e-2d1c3e4f5a6b")


def _fail(out: Outbox, cmd: dict, message: str) -> None:
    reply(out, cmd["request_id"], cmd["aggregate_key"], "rejected", message=message)


def reset_workflow(cmd: dict, body: dict, view: BatchView, out: Outbox, ts: int) -> None:
    wf, rid = cmd["aggregate_key"], cmd["request_id"]
    st = open_run_or_reply(cmd, view, out)  # a retried reset gets its first answer, and resets nothing
    if st is None:
        return
    history = view.history(wf, st["run_id"])
    point = next((e for e in history if e["seq"] == body["workflow_task_completed_seq"]), None)
    if point is None or point["attributes"][0] != "WorkflowTaskCompleted":
        _fail(out, cmd, f"event {body['workflow_task_completed_seq']} is not a WorkflowTaskCompleted of run {st['run_id']}")
        return
    kept = [e for e in history if e["seq"] < point["seq"]]
    if any(e["attributes"][0] == "StartChildWorkflowExecutionInitiated" for e in kept):
        _fail(out, cmd, "the branch point is after a child workflow was started; reset to an earlier point")
        return

    new_run_id = str(uuid.uuid5(_RESET_NS, f"{st['run_id']}/{point['seq']}/{cmd['event_id']}"))
    reason = body["reason"] or "reset"
    emit(view, out, st, "WorkflowExecutionTerminated",
         {"reason": f"{reason}: reset to event {point['seq']} as run {new_run_id}", "identity": body["identity"]}, ts=ts)
    waiters = st["result_waiters"]
    close_run(out, st, "terminated", ts, notify=False, notify_parent=False)
    st["result_waiters"] = []

    new = dict(st)
    new.update(run_id=new_run_id, status="running", close_time_ms=None, next_seq=1, wt_scheduled_seq=None,
               wt_attempt=0, wt_failure=None, wt_failure_cause=None, result=None, failure=None,
               result_waiters=waiters, pending_activities=[], pending_timers=[], pending_children=[],
               cancel_requested=False, history_warned=False, start_time_ms=ts,
               recent_requests=list(st["recent_requests"]), search_attributes=dict(st["search_attributes"]),
               updates=[dict(u) for u in st["updates"]],  # all finished: close_run failed the open ones
               # a reset runs the current code: the queue's default build (an operator may move it)
               build_id=view.build_defaults.get(st["task_queue"]))
    view.put(new)
    pending_acts: dict[str, dict] = {}
    timers: dict[str, dict] = {}
    for e in kept:
        kind, attrs = e["attributes"]
        if kind == "WorkflowExecutionStarted":
            attrs = {**attrs, "continued_from_run_id": st["run_id"], "build_id": new["build_id"]}
        ev = emit(view, out, new, kind, attrs, ts=e["timestamp_ms"], request_id=e["request_id"])
        if kind == "ActivityTaskScheduled":
            pending_acts[attrs["activity_id"]] = {
                "activity_id": attrs["activity_id"], "activity_type": attrs["activity_type"],
                "scheduled_seq": ev["seq"], "attempt": 1, "task_queue": attrs["options"]["task_queue"],
                "input": attrs["input"], "options": attrs["options"], "first_scheduled_ms": ts,
                "attempt_started_ms": ts, "last_heartbeat_ms": 0, "heartbeat_details": None,
                "cancel_requested": False, "retrying": False, "last_failure": None,
                "next_attempt_ms": None}
        elif kind in ("ActivityTaskCompleted", "ActivityTaskFailed", "ActivityTaskTimedOut", "ActivityTaskCanceled"):
            pending_acts.pop(attrs["activity_id"], None)
        elif kind == "TimerStarted":
            timers[attrs["timer_id"]] = {"timer_id": attrs["timer_id"], "fire_at_ms": attrs["fire_at_ms"],
                                         "started_seq": ev["seq"], "kind": "user"}
        elif kind in ("TimerFired", "TimerCanceled"):
            timers.pop(attrs["timer_id"], None)
        elif kind == "WorkflowTaskCompleted":
            new["wt_last_completed_seq"] = attrs["scheduled_seq"]
    for a in pending_acts.values():
        new["pending_activities"].append(a)
        _dispatch_attempt(out, new, a, ts)
    for t in timers.values():
        new["pending_timers"].append(t)
        start_timer(out, new, t["timer_id"], t["fire_at_ms"], "user")
    schedule_workflow_task(view, out, new, ts, full=True)
    remember(new, rid, "ok")
    reply(out, rid, wf, "ok", run_id=new_run_id)
    log.warning("audit: workflow %s run %s reset to event %d as run %s by %s", wf, st["run_id"], point["seq"],
                new_run_id, body["identity"] or "unknown")
