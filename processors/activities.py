"""Activity transitions: scheduling, results, retries with backoff, timeouts and heartbeats.

Retry policy and timeouts are enforced here, by the engine: a worker that dies mid-activity is
caught by the start-to-close (or heartbeat) timeout and the activity is retried with a new
attempt number. The timeouts are deadlines derived from the state (``processors.deadlines``,
fired by the processor itself); retry backoff is a durable timer (the timer service). A completion is accepted only from the attempt that is
pending, so a late completion of a timed-out attempt adds nothing to the history.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, cast

from kadence.schemas.records import (
    ActivityOptions,
    Failure,
    PendingActivity,
    RecordActivityHeartbeat,
    RespondActivityTaskCompleted,
    RespondActivityTaskFailed,
    WorkflowState,
)
from kadence.topics.records import idempotency_key

from .concurrency import begin_activity_slots, release_activity_slots
from .effects import Transition, activity_priority, emit, reply, start_timer, workflow_task_needed
from .streams import publish_from_activity

__all__ = [
    "DEFAULT_RETRY",
    "activity_heartbeat",
    "activity_result",
    "activity_timer_fired",
    "cancel_activity",
    "dispatch_attempt",
    "eager_requests",
    "fail_activity",
    "new_pending",
    "schedule_activity",
    "send_eager",
]

log = logging.getLogger(__name__)

#: used when an activity has no retry policy: retry for ever, 1 s doubling up to 100 s
DEFAULT_RETRY: dict[str, Any] = {
    "initial_interval_ms": 1000,
    "backoff_coefficient": 2.0,
    "maximum_interval_ms": None,
    "maximum_attempts": 0,
    "non_retryable_error_types": [],
}


def options_of(a: PendingActivity) -> ActivityOptions:
    """A pending activity's options: set when it is scheduled (the schema lets them be null only
    so that states written before they were kept still decode)."""
    opts = a["options"]
    assert opts is not None, f"activity {a['activity_id']} has no options"
    return opts


def _find(st: WorkflowState, activity_id: str, scheduled_seq: int) -> PendingActivity | None:
    for a in st["pending_activities"]:
        if a["activity_id"] == activity_id and a["scheduled_seq"] == scheduled_seq:
            return a
    return None


def _find_by_seq(st: WorkflowState, scheduled_seq: int) -> PendingActivity | None:
    for a in st["pending_activities"]:
        if a["scheduled_seq"] == scheduled_seq:
            return a
    return None


def dispatch_attempt(t: Transition, st: WorkflowState, a: PendingActivity) -> None:
    """Send the pending attempt to the activity workers and arm its timeouts (a paused run's
    attempt is held instead, and sent when the run is unpaused: ``processors.pause``)."""
    opts = options_of(a)
    a["attempt_started_ms"] = t.ts
    a["last_heartbeat_ms"] = 0
    a["retrying"] = False
    a["throttled"] = False
    a["held"] = st["paused"]
    if a["held"]:
        return
    t.out.tasks.append(
        (
            "activity",
            opts["task_queue"],
            {
                "workflow_id": st["workflow_id"],
                "run_id": st["run_id"],
                "workflow_type": st["workflow_type"],
                "activity_id": a["activity_id"],
                "activity_type": a["activity_type"],
                "task_queue": opts["task_queue"],
                "input": a["input"],
                "attempt": a["attempt"],
                "scheduled_seq": a["scheduled_seq"],
                "scheduled_time_ms": t.ts,
                "idempotency_key": idempotency_key(st["workflow_id"], st["run_id"], a["activity_id"]),
                "heartbeat_details": a["heartbeat_details"],
                "start_to_close_timeout_ms": opts.get("start_to_close_timeout_ms"),
                "heartbeat_timeout_ms": opts.get("heartbeat_timeout_ms"),
                "trace_id": None,
                "span_id": None,
                "headers": st.get("headers") or {},
                "priority": activity_priority(st, a),  # the lane it goes to
            },
        )
    )
    # its timeouts (start-to-close, heartbeat) follow from this state: processors.deadlines


def eager_requests(commands: list[Any]) -> set[str]:
    """The activity IDs a completing worker asked to run itself (``request_eager_execution``)."""
    return {
        c["activity_id"]
        for ctype, c in commands
        if ctype == "ScheduleActivityTask" and c.get("request_eager_execution")
    }


def send_eager(t: Transition, mark: int, asked: set[str], workflow_id: str, run_id: str | None) -> None:
    """Answer a completion whose worker asked to run some of its activities itself (decision
    0054): the first attempts the completion dispatched (the task records staged since ``mark``)
    go in the reply to it, in this transaction, instead of to the activity-task topic. Only an
    attempt with a start-to-close or heartbeat timeout goes eagerly: if the worker dies with it,
    that timeout retries the activity through the topic. The reply is written even when nothing
    went (the completion was stale or refused), so the worker stops waiting at once."""
    sent = []
    for i in range(mark, len(t.out.tasks)):
        kind, queue, task = t.out.tasks[i]
        if (
            kind == "activity"
            and task["activity_id"] in asked
            and task["workflow_id"] == workflow_id
            and task["run_id"] == run_id
            and task["attempt"] == 1
            and (task["start_to_close_timeout_ms"] or task["heartbeat_timeout_ms"])
        ):
            t.out.tasks[i] = ("eager", queue, task)  # stamped with the trace like any task, not produced
            sent.append(task)
    t.out.eager_activities += len(sent)
    reply(t.out, t.cmd["request_id"], workflow_id, "ok", run_id=run_id, activity_tasks=sent)


def new_pending(scheduled: Mapping[str, Any], seq: int, ts: int) -> PendingActivity:
    """A pending activity at its first attempt, from what schedules it (a ``ScheduleActivityTask``
    command, or the ``ActivityTaskScheduled`` event a reset copies) recorded at ``seq``."""
    return {
        "activity_id": scheduled["activity_id"],
        "activity_type": scheduled["activity_type"],
        "scheduled_seq": seq,
        "attempt": 1,
        "task_queue": scheduled["options"]["task_queue"],
        "input": scheduled["input"],
        "options": scheduled["options"],
        "first_scheduled_ms": ts,
        "attempt_started_ms": ts,
        "last_heartbeat_ms": 0,
        "heartbeat_details": None,
        "cancel_requested": False,
        "retrying": False,
        "last_failure": None,
        "next_attempt_ms": None,
        "held": False,
        "slots_held": 0,
        "throttled": False,
    }


def schedule_activity(t: Transition, st: WorkflowState, c: Mapping[str, Any], completed_seq: int) -> None:
    ev = emit(
        t,
        st,
        "ActivityTaskScheduled",
        {
            "activity_id": c["activity_id"],
            "activity_type": c["activity_type"],
            "input": c["input"],
            "options": c["options"],
            "workflow_task_completed_seq": completed_seq,
        },
    )
    a = new_pending(c, ev["seq"], t.ts)
    st["pending_activities"].append(a)
    if begin_activity_slots(t, st, a):  # else dispatched when it holds its concurrency slots
        dispatch_attempt(t, st, a)  # the schedule-to-close deadline follows from the state too


def _drop(t: Transition, st: WorkflowState, a: PendingActivity) -> None:
    """The activity closed: it leaves the run's state and its concurrency slots go back."""
    st["pending_activities"].remove(a)
    release_activity_slots(t, st, a)


def fail_activity(t: Transition, st: WorkflowState, a: PendingActivity, failure: Failure) -> None:
    """The engine fails the activity for good (its concurrency slot was refused)."""
    _drop(t, st, a)
    emit(
        t,
        st,
        "ActivityTaskFailed",
        {
            "activity_id": a["activity_id"],
            "scheduled_seq": a["scheduled_seq"],
            "attempt": a["attempt"],
            "failure": failure,
            "identity": "engine",
        },
    )
    workflow_task_needed(t, st)


def _retry_delay(a: PendingActivity, failure: Failure, ts: int) -> int | None:
    """Milliseconds before the next attempt, or None when the activity must not be retried."""
    policy = options_of(a).get("retry_policy") or DEFAULT_RETRY
    if failure.get("non_retryable") or failure["type"] in policy["non_retryable_error_types"]:
        return None
    if policy["maximum_attempts"] and a["attempt"] >= policy["maximum_attempts"]:
        return None
    cap = policy["maximum_interval_ms"] or 100 * policy["initial_interval_ms"]
    try:
        delay = int(min(policy["initial_interval_ms"] * policy["backoff_coefficient"] ** (a["attempt"] - 1), cap))
    except OverflowError:
        # past about attempt 1,025 at a coefficient of 2.0 the float power overflows; it raised out
        # of the transition, and the activity was never retried again (kadence.testing found it)
        delay = int(cap)
    s2c = options_of(a).get("schedule_to_close_timeout_ms")
    if s2c and ts + delay >= a["first_scheduled_ms"] + s2c:
        return None  # the next attempt could not start before the schedule-to-close deadline
    return delay


def _attempt_failed(
    t: Transition,
    st: WorkflowState,
    a: PendingActivity,
    failure: Failure,
    *,
    identity: str = "",
    timeout_type: str | None = None,
) -> None:
    aid, sseq, attempt = a["activity_id"], a["scheduled_seq"], a["attempt"]
    delay = _retry_delay(a, failure, t.ts)
    if delay is not None and not a["cancel_requested"]:
        emit(
            t,
            st,
            "ActivityTaskAttemptFailed",
            {
                "activity_id": aid,
                "scheduled_seq": sseq,
                "attempt": attempt,
                "failure": failure,
                "timeout_type": timeout_type,
                "retry_in_ms": delay,
            },
        )
        a["attempt"] += 1
        a["retrying"] = True
        a["last_failure"] = failure
        a["next_attempt_ms"] = t.ts + delay
        start_timer(
            t.out,
            st,
            f"a{a['scheduled_seq']}.{a['attempt']}.retry",
            t.ts + delay,
            "retry_backoff",
            scheduled_seq=a["scheduled_seq"],
            attempt=a["attempt"],
        )
        return
    _drop(t, st, a)
    if timeout_type:
        emit(
            t,
            st,
            "ActivityTaskTimedOut",
            {
                "activity_id": aid,
                "scheduled_seq": sseq,
                "attempt": attempt,
                "timeout_type": timeout_type,
                "failure": failure,
            },
        )
    else:
        emit(
            t,
            st,
            "ActivityTaskFailed",
            {"activity_id": aid, "scheduled_seq": sseq, "attempt": attempt, "failure": failure, "identity": identity},
        )
    workflow_task_needed(t, st)


def activity_result(
    t: Transition,
    body: RespondActivityTaskCompleted | RespondActivityTaskFailed,
    *,
    failed: bool,
    task: str = "incremental",
) -> bool:
    """Record an attempt's result; False when the completion is stale (nothing recorded).

    ``task``: what follows a completion: ``"incremental"`` a workflow task with the new events,
    ``"full"`` one with the whole history, ``"none"`` nothing (the caller records the eager
    workflow task the worker already ran)."""
    st = t.view.state(t.cmd["aggregate_key"])
    a = None
    if st is not None and st["status"] == "running" and st["run_id"] == t.cmd["run_id"]:
        a = _find(st, body["activity_id"], body["scheduled_seq"])
    if st is None or a is None or a["attempt"] != body["attempt"] or a["retrying"]:
        t.out.stale += 1  # duplicate, late (timed out) or from an attempt that is no longer current
        return False
    if failed:
        _attempt_failed(t, st, a, cast(RespondActivityTaskFailed, body)["failure"], identity=body["identity"])
    else:
        _drop(t, st, a)
        ev = emit(
            t,
            st,
            "ActivityTaskCompleted",
            {
                "activity_id": a["activity_id"],
                "scheduled_seq": a["scheduled_seq"],
                "attempt": a["attempt"],
                "result": cast(RespondActivityTaskCompleted, body)["result"],
                "identity": body["identity"],
            },
        )
        published = cast(RespondActivityTaskCompleted, body).get("published")
        if published:  # written now, with the result: an attempt the engine refuses published nothing
            publish_from_activity(t, st, published, a["activity_id"], a["attempt"], ev["seq"])
        if task != "none":
            workflow_task_needed(t, st, full=task == "full")
    t.view.put(st)
    return True


def _timeout_failure(kind: str, a: PendingActivity) -> Failure:
    return {
        "type": "TimeoutError",
        "message": f"activity {a['activity_type']} attempt {a['attempt']}: {kind} timeout",
        "stack_trace": "",
        "non_retryable": False,
        "details": None,
        "cause": a.get("last_failure"),
    }


def activity_timer_fired(t: Transition, st: WorkflowState, body: Mapping[str, Any]) -> bool:
    """Returns False when the timer is stale (the activity or attempt it guarded is gone)."""
    kind = body["kind"]
    a = _find_by_seq(st, body["scheduled_seq"])
    if a is None:
        return False
    if kind == "schedule_to_close":
        _drop(t, st, a)
        emit(
            t,
            st,
            "ActivityTaskTimedOut",
            {
                "activity_id": a["activity_id"],
                "scheduled_seq": a["scheduled_seq"],
                "attempt": a["attempt"],
                "timeout_type": "schedule_to_close",
                "failure": _timeout_failure("schedule-to-close", a),
            },
        )
        workflow_task_needed(t, st)
        return True
    if a["attempt"] != body["attempt"]:
        return False
    if kind == "retry_backoff":
        if not a["retrying"]:
            return False
        dispatch_attempt(t, st, a)
        return True
    if a["retrying"]:
        return False
    if kind == "heartbeat_timeout":
        hb = options_of(a)["heartbeat_timeout_ms"]
        last = max(a["last_heartbeat_ms"], a["attempt_started_ms"])
        if (
            hb is None or last + hb > t.ts
        ):  # (no heartbeat timeout: a deadline from nowhere, stale)  # heartbeats came in meanwhile: the deadline index waits from the latest one
            return False
        _attempt_failed(t, st, a, _timeout_failure("heartbeat", a), timeout_type="heartbeat")
        return True
    if kind == "activity_timeout":
        _attempt_failed(t, st, a, _timeout_failure("start-to-close", a), timeout_type="start_to_close")
        return True
    return False


def activity_heartbeat(t: Transition, body: RecordActivityHeartbeat) -> None:
    wf, rid = t.cmd["aggregate_key"], t.cmd["request_id"]
    st = t.view.state(wf)
    a = None
    if st is not None and st["status"] == "running" and st["run_id"] == t.cmd["run_id"]:
        a = _find(st, body["activity_id"], body["scheduled_seq"])
    if st is None or a is None or a["attempt"] != body["attempt"] or a["retrying"]:
        # the attempt is over (completed, timed out, cancelled, or the workflow closed): stop
        reply(t.out, rid, wf, "cancel_requested", message="activity attempt is no longer current")
        return
    a["last_heartbeat_ms"] = t.ts
    a["heartbeat_details"] = body["details"]
    t.view.put(st)
    reply(t.out, rid, wf, "cancel_requested" if a["cancel_requested"] else "ok", run_id=st["run_id"])


def cancel_activity(t: Transition, st: WorkflowState, activity_id: str) -> None:
    """The workflow gave up on an activity: record the request and its (immediate) cancellation.

    The running attempt learns of it at its next heartbeat; its result, if any, is ignored."""
    a = next((x for x in st["pending_activities"] if x["activity_id"] == activity_id), None)
    # always recorded: it is the echo of the workflow's command, which replay matches
    emit(
        t,
        st,
        "ActivityTaskCancelRequested",
        {"activity_id": activity_id, "scheduled_seq": a["scheduled_seq"] if a else 0},
    )
    if a is None:
        return  # it finished first; its result is already in history
    _drop(t, st, a)
    emit(
        t,
        st,
        "ActivityTaskCanceled",
        {"activity_id": activity_id, "scheduled_seq": a["scheduled_seq"], "attempt": a["attempt"], "identity": ""},
    )
