"""Reset: a new run that branches from a ``WorkflowTaskCompleted`` event of the workflow's current run.

The new run's history is the old run's events before that completion (the start, the decisions
before it and every result that had arrived), followed by a fresh workflow task, so the
workflow's current code decides again from that point. An open run is terminated with a reason
that names the new run; a closed run (completed, failed, canceled, terminated, timed out) stays
as it ended. The new run's start event names the old run (the branch).

The engine keeps the history of open runs only, so a reset of a closed run carries the closed
run's events up to the branch point (``kept_events``, read by the SDK from the history topic);
they are checked against the run's state (its run ID, one event per seq from 1, within its
history length, the last one a ``WorkflowTaskCompleted``) before anything changes.

Policy for what was pending at the branch point (explicit, and checked before anything changes):

* activities scheduled before the point without a result before it run again in the new run
  (attempt 1; their idempotency key names the new run);
* timers started before the point and not fired keep their original fire time;
* child workflows: a reset across a started child is refused (the child would be orphaned or
  started twice); reset to a point before the child was started instead; a closed child run is
  not reset (its parent has recorded its outcome): reset the parent;
* signals received after the point are not carried over (resend them if they still matter).

A dry run (``dry_run``) is the reset itself, run and then rolled back: its answer (the
``ResetPlan``, or the refusal) is the one the reset would give, and nothing is written.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kadence.schemas.records import Command, PendingActivity, PendingTimer, ResetWorkflow, WorkflowState
from kadence.topics import serde
from kadence.topics.errors import SchemaError

from .activities import dispatch_attempt, new_pending
from .closing import close_run
from .concurrency import begin_activity_slots, begin_run_slots
from .effects import (
    Outbox,
    Transition,
    deduplicated,
    emit,
    remember,
    reply,
    schedule_workflow_task,
    start_timer,
)

__all__ = ["reset_workflow"]

log = logging.getLogger(__name__)

_RESET_NS = uuid.UUID("0f5a2c1e-7d43-4f7a-9b8e-2d1c3e4f5a6b")


def _fail(out: Outbox, cmd: Command, message: str, run_id: str | None = None) -> None:
    reply(out, cmd["request_id"], cmd["aggregate_key"], "rejected", run_id=run_id, message=message)


def reset_workflow(t: Transition, body: ResetWorkflow) -> None:
    if not body["dry_run"]:
        _reset(t, body)
        return
    wf = t.cmd["aggregate_key"]
    checkpoint, mark, counts = t.view.checkpoint(wf), t.out.mark(), (t.out.stale, t.out.duplicates)
    _reset(t, body, dry_run=True)
    answer = next((r for r in t.out.replies[mark[2] :] if r["request_id"] == t.cmd["request_id"]), None)
    t.view.rollback(wf, checkpoint)
    t.out.truncate(mark)
    t.out.stale, t.out.duplicates = counts
    if answer is not None:
        t.out.replies.append({**answer, "run_id": None if answer["status"] == "ok" else answer["run_id"]})


def _closed_history(cmd: Command, body: ResetWorkflow, st: WorkflowState, out: Outbox) -> list[dict[str, Any]] | None:
    """The closed run's events 1..branch point sent with the reset, checked against its state;
    None after refusing."""
    wf, point = cmd["aggregate_key"], body["workflow_task_completed_seq"]
    if not body["kept_events"]:
        _fail(
            out,
            cmd,
            f"run {st['run_id']} is {st['status']}: the engine keeps no history of a closed run, so "
            "the reset must carry its events up to the branch point (the SDK and CLI send them)",
            st["run_id"],
        )
        return None
    codec = serde.codec("HistoryEvent")
    try:
        events = [codec.decode(raw) for raw in body["kept_events"]]
    except SchemaError as exc:
        _fail(out, cmd, f"the events sent with the reset do not decode: {exc}", st["run_id"])
        return None
    wrong = next(
        (
            e
            for i, e in enumerate(events, 1)
            if e["seq"] != i or e["run_id"] != st["run_id"] or e["aggregate_key"] != wf
        ),
        None,
    )
    if wrong is not None or len(events) != point or point >= st["next_seq"]:
        _fail(
            out,
            cmd,
            f"the events sent with the reset are not events 1..{point} of run {st['run_id']} "
            f"(which has {st['next_seq'] - 1})",
            st["run_id"],
        )
        return None
    return events


def _branch(
    t: Transition, body: ResetWorkflow, st: WorkflowState, was_open: bool
) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """The branch point (a WorkflowTaskCompleted of the run) and the events before it, or None
    when the reset is refused (answered here)."""
    if was_open:
        history = t.view.history(st["workflow_id"], st["run_id"])
    else:
        closed = _closed_history(t.cmd, body, st, t.out)
        if closed is None:
            return None
        history = closed
    point = next((e for e in history if e["seq"] == body["workflow_task_completed_seq"]), None)
    if point is None or point["attributes"][0] != "WorkflowTaskCompleted":
        _fail(
            t.out,
            t.cmd,
            f"event {body['workflow_task_completed_seq']} is not a WorkflowTaskCompleted of run {st['run_id']}",
            st["run_id"],
        )
        return None
    kept = [e for e in history if e["seq"] < point["seq"]]
    if any(e["attributes"][0] == "StartChildWorkflowExecutionInitiated" for e in kept):
        _fail(
            t.out,
            t.cmd,
            "the branch point is after a child workflow was started; reset to an earlier point",
            st["run_id"],
        )
        return None
    return point, kept


def _refused(t: Transition, st: WorkflowState | None) -> bool:
    """Whether the reset cannot apply to ``st`` at all (answered here): no such workflow, not its
    current run, or a closed child."""
    wf, rid = t.cmd["aggregate_key"], t.cmd["request_id"]
    if st is None:
        reply(t.out, rid, wf, "not_found", message=f"workflow {wf!r} not found (or its closed run was archived)")
        return True
    if t.cmd["run_id"] and t.cmd["run_id"] != st["run_id"]:
        _fail(
            t.out,
            t.cmd,
            f"run {t.cmd['run_id']} is not the current run of workflow {wf!r} (only the current run "
            f"can be reset; it is {st['run_id']})",
            st["run_id"],
        )
        return True
    if st["status"] != "running" and st["parent_workflow_id"]:
        _fail(
            t.out,
            t.cmd,
            f"run {st['run_id']} is a closed child of workflow {st['parent_workflow_id']!r}, which has "
            "recorded its outcome: reset the parent instead",
            st["run_id"],
        )
        return True
    return False


def _new_run(t: Transition, st: WorkflowState, new_run_id: str, waiters: list[Any]) -> WorkflowState:
    """The new run's state: the old one's identity and options, nothing of its progress."""
    return {
        **st,
        "run_id": new_run_id,
        "status": "running",
        "close_time_ms": None,
        "next_seq": 1,
        "wt_scheduled_seq": None,
        "wt_attempt": 0,
        "wt_failure": None,
        "wt_failure_cause": None,
        "result": None,
        "failure": None,
        "result_waiters": waiters,
        "pending_activities": [],
        "pending_timers": [],
        "pending_children": [],
        "cancel_requested": False,
        "history_warned": False,
        "history_bytes": 0,  # counted from the new run's first event (the old run's count stays with it)
        "start_time_ms": t.ts,
        "recent_requests": list(st["recent_requests"]),
        "search_attributes": dict(st["search_attributes"]),
        # the updates are all finished (close_run failed the open ones)
        "updates": [u.copy() for u in st["updates"]],
        "paused": False,
        "held_timers": [],
        "first_task_at_ms": None,  # a reset run runs now (a cron run stays one: its next run waits)
        "throttled_until_ms": None,
        # a reset runs the current code: the queue's default build (an operator may move it)
        "build_id": t.view.build_defaults.get(st["task_queue"]),
    }


def _copy_kept(
    t: Transition, new: WorkflowState, kept: list[dict[str, Any]], old_run_id: str, was_open: bool
) -> tuple[dict[str, PendingActivity], dict[str, PendingTimer]]:
    """The kept events, written again into the new run; the activities and timers still open at
    the branch point."""
    pending_acts: dict[str, PendingActivity] = {}
    timers: dict[str, PendingTimer] = {}
    for e in kept:
        kind, attrs = e["attributes"]
        if kind == "ConcurrencySlotAcquired" and (attrs["activity_id"] or not was_open):
            continue  # a slot the new run asks for again (its activities' always)
        if kind == "WorkflowExecutionStarted":
            attrs = {**attrs, "continued_from_run_id": old_run_id, "build_id": new["build_id"]}
        ev = emit(t, new, kind, attrs, ts=e["timestamp_ms"], request_id=e["request_id"])
        if kind == "ActivityTaskScheduled":
            pending_acts[attrs["activity_id"]] = new_pending(attrs, ev["seq"], t.ts)  # from its first attempt
        elif kind in ("ActivityTaskCompleted", "ActivityTaskFailed", "ActivityTaskTimedOut", "ActivityTaskCanceled"):
            pending_acts.pop(attrs["activity_id"], None)
        elif kind == "TimerStarted":
            timers[attrs["timer_id"]] = {
                "timer_id": attrs["timer_id"],
                "fire_at_ms": attrs["fire_at_ms"],
                "started_seq": ev["seq"],
                "kind": "user",
            }
        elif kind in ("TimerFired", "TimerCanceled"):
            timers.pop(attrs["timer_id"], None)
        elif kind == "WorkflowTaskCompleted":
            new["wt_last_completed_seq"] = attrs["scheduled_seq"]
    return pending_acts, timers


def _reset(t: Transition, body: ResetWorkflow, *, dry_run: bool = False) -> None:
    wf, rid = t.cmd["aggregate_key"], t.cmd["request_id"]
    st = t.view.state(wf)
    if deduplicated(st, t.cmd, t.out, t.view):  # a retried reset gets its first answer, and resets nothing
        return
    if _refused(t, st):
        return
    assert st is not None  # _refused answered a missing workflow
    was_open = st["status"] == "running"
    branch = _branch(t, body, st, was_open)
    if branch is None:
        return
    point, kept = branch

    new_run_id = str(uuid.uuid5(_RESET_NS, f"{st['run_id']}/{point['seq']}/{t.cmd['event_id']}"))
    reason = body["reason"] or "reset"
    waiters: list[Any] = []
    if was_open:
        emit(
            t,
            st,
            "WorkflowExecutionTerminated",
            {"reason": f"{reason}: reset to event {point['seq']} as run {new_run_id}", "identity": body["identity"]},
        )
        waiters = st["result_waiters"]
        close_run(t, st, "terminated", notify=False, notify_parent=False, keep_slots=True)
        st["result_waiters"] = []

    new = _new_run(t, st, new_run_id, waiters)
    t.view.put(new)
    if not was_open and new["concurrency"]:  # a closed chain gave its slots back: asked for again
        begin_run_slots(t, new, new["concurrency"])
    pending_acts, timers = _copy_kept(t, new, kept, st["run_id"], was_open)
    for a in pending_acts.values():
        new["pending_activities"].append(a)
        if begin_activity_slots(t, new, a):  # else when it holds its concurrency slots again
            dispatch_attempt(t, new, a)
    for timer in timers.values():
        new["pending_timers"].append(timer)
        start_timer(t.out, new, timer["timer_id"], timer["fire_at_ms"], "user")
    schedule_workflow_task(t, new, full=True)
    remember(new, rid, "ok")
    reply(
        t.out,
        rid,
        wf,
        "ok",
        run_id=new_run_id,
        reset_plan={
            "terminates_run_id": st["run_id"] if was_open else None,
            "from_status": "running" if was_open else st["status"],
            "branch_event": point["seq"],
            "kept_events": len(kept),
            "activities_rerun": [a["activity_type"] for a in pending_acts.values()],
            "timers_kept": len(timers),
        },
    )
    if not dry_run:
        log.warning(
            "audit: workflow %s run %s (%s) reset to event %d as run %s by %s",
            wf,
            st["run_id"],
            "open" if was_open else st["status"],
            point["seq"],
            new_run_id,
            body["identity"] or "unknown",
        )
