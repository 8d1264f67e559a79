"""The workflow state machine: one command in, history events, state, tasks, timers and replies out.

Pure logic, no Kafka: ``transition(cmd, view, out, ts)`` reads and writes workflow state through
a ``BatchView`` (an overlay over the shard's committed store) and appends everything it emits to
an ``Outbox``. The history processor turns an outbox into one Kafka transaction, and applies the
overlay to its store only after that transaction commits.

``transition`` makes one ``Transition`` (``effects.py``: the command, the view, the outbox, the
batch's time) and hands it to the command's handler, which takes it and the command's typed body
(``schemas/records.py``); every step after it takes the same ``Transition`` first, then what is
its own (the run's state, a workflow task's command).

Every request that carries a request ID (start, signal, cancel, terminate) is answered once and
remembered: a retry gets the first answer and changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard, cast

from kadence.schemas.records import (
    AwaitWorkflowResult,
    Command,
    EagerWorkflowTask,
    Failure,
    FireTimer,
    PurgeClosedRun,
    QueryWorkflow,
    RequestCancelWorkflow,
    RequestWorkflowHistory,
    RespondActivityTaskCompleted,
    RespondWorkflowTaskCompleted,
    RespondWorkflowTaskFailed,
    SignalWorkflow,
    StartWorkflow,
    TerminateWorkflow,
    UpdateWorkflowBuild,
    WorkflowState,
)
from kadence.topics import records
from kadence.topics.builds import validate_build_id
from kadence.topics.errors import ConfigError
from kadence.topics.records import failure_record, start_run_id
from kadence.topics.standalone import is_activity_key

from .activities import (
    activity_heartbeat,
    activity_result,
    activity_timer_fired,
    cancel_activity,
    dispatch_attempt,
    eager_requests,
    fail_activity,
    schedule_activity,
    send_eager,
)
from .children import child_event, notify_parent_of_start, start_child
from .closing import close_run, closing_outruns_signals
from .concurrency import begin_run_slots, concurrency_command
from .debounce import begin_debounce, join_debounce, joins_debounce
from .effects import (
    MAX_RESULT_WAITERS,
    RECENT_REQUESTS,
    BatchView,
    Outbox,
    Transition,
    closed_message,
    deduplicated,
    description,
    dispatch_workflow_task,
    emit,
    open_run_or_reply,
    recent,
    remember,
    reply,
    schedule_workflow_task,
    send_command,
    start_timer,
    workflow_task_needed,
)
from .pause import hold_timer, pause_workflow, unpause_workflow
from .reset import reset_workflow
from .runs import begin_run, close_or_continue, continue_as_new, cron_run_id, initial_build, new_run
from .standalone import begin_activity_run, refused, settle
from .start_checks import invalid_start, start_rejection
from .streams import publish_from_workflow
from .updates import complete_update, update_accepted, update_requested

__all__ = [
    "HISTORY_LIMIT_EVENTS",
    "HISTORY_WARN_EVENTS",
    "MAX_RESULT_WAITERS",
    "RECENT_REQUESTS",
    "BatchView",
    "Outbox",
    "transition",
]

log = logging.getLogger(__name__)

#: ``topics.records``: a warning, then the run fails (module globals: the tests make them small)
HISTORY_WARN_EVENTS = records.HISTORY_WARN_EVENTS
HISTORY_LIMIT_EVENTS = records.HISTORY_LIMIT_EVENTS
#: an eager workflow task whose workflow time is further than this from the processor's clock
#: is refused (the worker's clock is off); the workflow then gets an ordinary workflow task
EAGER_MAX_SKEW_MS = 60_000


def _start(t: Transition, body: StartWorkflow, *, answer: bool = True) -> WorkflowState | None:
    """Start a run; returns its state, or None when rejected (the reply says why)."""
    wf, rid = t.cmd["aggregate_key"], t.cmd["request_id"]
    invalid = invalid_start(wf, body)
    if invalid:  # a producer that bypassed the SDK's checks: nothing is recorded
        reply(t.out, rid, wf, "rejected", message=invalid)
        notify_parent_of_start(t.out, wf, body, "start_failed", "", invalid)
        return None
    st = t.view.state(wf)
    seen = recent(st, rid)
    if seen is not None:
        t.out.duplicates += 1
        reply(t.out, rid, wf, seen["status"], run_id=seen["run_id"], message=seen["message"])
        if seen["status"] == "ok":  # a resent start: its result request too (once)
            _await_with_start(t, body)
        return None
    if joins_debounce(st, body):  # the run waits for a quiet spell: this start joins it
        assert st is not None
        join_debounce(t, st, body, rid)
        remember(st, rid, "ok")
        t.view.put(st)
        reply(t.out, rid, wf, "ok", run_id=st["run_id"])
        _await_with_start(t, body)
        return None
    if st is not None:
        policy = body["id_reuse_policy"]
        if policy == "terminate_if_running" and st["status"] == "running":
            _terminate_run(t, st, "terminated by a start with terminate_if_running")
        reject = start_rejection(st, policy)
        if reject:
            remember(st, rid, "already_started", reject)
            t.view.put(st)
            reply(t.out, rid, wf, "already_started", run_id=st["run_id"], message=reject)
            notify_parent_of_start(t.out, wf, body, "start_failed", st["run_id"], reject)
            return None
    new = new_run(st, wf, body, start_run_id(t.cmd["event_id"]), t.ts, build_id=initial_build(t, body))
    if body.get("concurrency"):  # its first workflow task waits for the slots (processors.concurrency)
        begin_run_slots(t, new, body["concurrency"])
    begin_debounce(t, new, body)
    eager = body.get("eager_workflow_task")
    eager_fits = eager is not None and _eager_start_fits(new, eager, t.ts)
    standalone = body.get("activity") is not None  # (its key is an activity's: ``invalid_start``)
    begin_run(t, new, body, request_id=rid, first_task=not (eager_fits or standalone))
    if standalone:
        begin_activity_run(t, new, body)
    notify_parent_of_start(t.out, wf, body, "started", new["run_id"])
    if answer:
        remember(new, rid, "ok")
    if eager is not None and eager_fits:
        # the first workflow task, run by the client's worker before the start was sent (an
        # eager start): recorded with the start, in its transaction, as if it had been dispatched
        _record_eager_task(t, new, eager, "eager start", rid)
    elif eager is not None:
        t.out.eager_refused += 1
    if answer:
        reply(t.out, rid, wf, "ok", run_id=new["run_id"])
    _await_with_start(t, body)
    return new


def _await_with_start(t: Transition, body: StartWorkflow) -> None:
    """The result request an accepted start carries (``execute_workflow``): answered now if the
    workflow already closed (in an eager first task), else when it closes, as an
    ``AwaitWorkflowResult`` sent right after the start would be; once per request ID."""
    rid = body.get("result_request_id")
    st = t.view.state(t.cmd["aggregate_key"])
    if not rid or st is None:
        return
    if st["status"] != "running":
        reply(
            t.out,
            rid,
            st["workflow_id"],
            st["status"],
            run_id=st["run_id"],
            result=st["result"],
            failure=st["failure"],
            memo=st["memo"],
        )
    elif rid not in st["result_waiters"]:
        st["result_waiters"].append(rid)
        if len(st["result_waiters"]) > MAX_RESULT_WAITERS:
            del st["result_waiters"][0]
        t.view.put(st)


def _eager_start_fits(st: WorkflowState, eager: EagerWorkflowTask, ts: int) -> bool:
    """Can the first workflow task a client's worker ran be the new run's? Not for a cron run
    (its code waits for its time), a run pinned to another build than the worker's, or a worker
    whose clock is off; the run then gets an ordinary first workflow task."""
    return (
        st["first_task_at_ms"] is None  # (a debounced start's is set)
        and not st["cron_schedule"]
        and not st["concurrency"]
        and eager["build_id"] == st["build_id"]
        and eager["base_scheduled_seq"] == 0
        and abs(eager["workflow_time_ms"] - ts) <= EAGER_MAX_SKEW_MS
    )


def _record_eager_task(
    t: Transition, st: WorkflowState, eager: EagerWorkflowTask, identity: str, rid: str | None
) -> None:
    """Record a workflow task a worker ran without the engine dispatching it (after an
    activity's result, or with a start): WorkflowTaskScheduled at the workflow time its code ran
    with, then its completion and commands, marked with the request that carried it."""
    st["wt_attempt"] = 1
    ev = emit(
        t, st, "WorkflowTaskScheduled", {"task_queue": st["task_queue"], "attempt": 1}, ts=eager["workflow_time_ms"]
    )
    st["wt_scheduled_seq"] = ev["seq"]
    st["wt_needed"] = False
    t.out.eager_accepted += 1
    _complete_task(
        t,
        st,
        {
            "scheduled_seq": ev["seq"],
            "commands": eager["commands"],
            "identity": identity,
            "build_id": eager["build_id"],
        },
        request_id=rid,
    )


def _current_task(
    t: Transition, body: RespondWorkflowTaskCompleted | RespondWorkflowTaskFailed | RequestWorkflowHistory
) -> WorkflowState | None:
    """The state if the command's workflow-task token is the pending one, else None (stale)."""
    st = t.view.state(t.cmd["aggregate_key"])
    if (
        st is None
        or st["run_id"] != t.cmd["run_id"]
        or st["status"] != "running"
        or st["wt_scheduled_seq"] != body["scheduled_seq"]
        or body.get("build_id") != st["build_id"]
    ):
        t.out.stale += 1  # (a task answered by a worker of another build: the run was moved)
        return None
    return st


def _apply_command(
    t: Transition,
    st: WorkflowState,
    ctype: str,
    c: Mapping[str, Any],
    done_seq: int,
    carried_signals: list[dict[str, Any]] | None = None,
) -> None:
    if ctype == "ScheduleActivityTask":
        if any(a["activity_id"] == c["activity_id"] for a in st["pending_activities"]):
            log.warning(
                "workflow %s run %s: duplicate activity id %s ignored",
                st["workflow_id"],
                st["run_id"],
                c["activity_id"],
            )
            return
        schedule_activity(t, st, c, done_seq)
    elif ctype == "StartTimer":
        # an absolute time (workflow.sleep_until) stands however late this task is recorded
        fire_at = c.get("fire_at_ms") or t.ts + max(0, c["duration_ms"])
        ev = emit(
            t,
            st,
            "TimerStarted",
            {"timer_id": c["timer_id"], "fire_at_ms": fire_at, "workflow_task_completed_seq": done_seq},
        )
        st["pending_timers"].append(
            {"timer_id": c["timer_id"], "fire_at_ms": fire_at, "started_seq": ev["seq"], "kind": "user"}
        )
        start_timer(t.out, st, c["timer_id"], fire_at, "user")
    elif ctype == "CancelTimer":
        timer = next((x for x in st["pending_timers"] if x["timer_id"] == c["timer_id"]), None)
        if timer is not None:
            st["pending_timers"].remove(timer)
        emit(t, st, "TimerCanceled", {"timer_id": c["timer_id"], "started_seq": timer["started_seq"] if timer else 0})
    elif ctype == "RequestCancelActivityTask":
        cancel_activity(t, st, c["activity_id"])
    elif ctype == "RecordMarker":
        emit(t, st, "MarkerRecorded", {"name": c["name"], "details": c["details"]})
    elif ctype == "PublishToStream":
        publish_from_workflow(t, st, c["stream"], c["value"])
    elif ctype == "UpsertSearchAttributes":
        st["search_attributes"].update(c["search_attributes"])
        emit(t, st, "SearchAttributesUpserted", {"search_attributes": c["search_attributes"]})
    elif ctype == "CompleteWorkflowExecution":
        nxt = cron_run_id(st)
        emit(t, st, "WorkflowExecutionCompleted", {"result": c["result"], "new_run_id": nxt})
        close_or_continue(t, st, "completed", nxt, result=c["result"])
    elif ctype == "FailWorkflowExecution":
        nxt = cron_run_id(st)
        emit(t, st, "WorkflowExecutionFailed", {"failure": c["failure"], "new_run_id": nxt})
        close_or_continue(t, st, "failed", nxt, failure=c["failure"])
    elif ctype == "CancelWorkflowExecution":
        emit(t, st, "WorkflowExecutionCanceled", {"details": c["details"]})
        close_run(t, st, "canceled", failure=_failure("CancelledError", "workflow canceled"))
    elif ctype == "ContinueAsNewWorkflowExecution":
        continue_as_new(t, st, c, carried_signals=carried_signals)
    elif ctype == "StartChildWorkflowExecution":
        start_child(t, st, c, done_seq)
    elif ctype == "CompleteWorkflowUpdate":
        complete_update(t, st, c)
    elif ctype == "RequestCancelExternalWorkflowExecution":
        ev = emit(t, st, "RequestCancelExternalInitiated", {"workflow_id": c["workflow_id"]})
        send_command(
            t.out,
            c["workflow_id"],
            "RequestCancelWorkflow",
            {"reason": f"requested by {st['workflow_id']}"},
            request_id=f"cancel:{st['run_id']}:{ev['seq']}",
        )
    else:  # pragma: no cover - the schema's union admits nothing else
        raise ValueError(f"unknown workflow command {ctype}")


_failure = failure_record


def _workflow_task_completed(t: Transition, body: RespondWorkflowTaskCompleted) -> None:
    asked, mark = eager_requests(body["commands"]), len(t.out.tasks)
    st = _current_task(t, body)
    if st is not None:
        refused, carried = closing_outruns_signals(t, st, body)
        if not refused:
            _complete_task(t, st, body, carried_signals=carried)
    if asked:
        send_eager(t, mark, asked, t.cmd["aggregate_key"], t.cmd["run_id"])


def _complete_task(
    t: Transition,
    st: WorkflowState,
    body: RespondWorkflowTaskCompleted,
    *,
    request_id: str | None = None,
    carried_signals: list[dict[str, Any]] | None = None,
) -> None:
    """Record the completion of the pending workflow task (``body``: scheduled_seq, commands,
    identity, build_id) and apply its commands. ``carried_signals``: signals recorded after the
    task was scheduled, which a continue-as-new among its commands passes to the next run."""
    done = emit(
        t,
        st,
        "WorkflowTaskCompleted",
        {
            "scheduled_seq": body["scheduled_seq"],
            "identity": body["identity"],
            "build_id": body["build_id"],
        },
        request_id=request_id,
    )
    st["wt_scheduled_seq"] = None
    st["wt_last_completed_seq"] = body["scheduled_seq"]
    st["wt_last_eager_request"] = request_id
    st["wt_failure"] = st["wt_failure_cause"] = None
    for ctype, c in body["commands"]:
        if st["status"] != "running":
            break  # nothing follows a close
        _apply_command(t, st, ctype, c, done["seq"], carried_signals)
    if st["status"] == "running":
        _check_history_size(t, st)
    if st["status"] == "running" and st["wt_needed"]:
        schedule_workflow_task(t, st)
    if st["continued_run_id"] is None:  # else the next run's state is already staged
        t.view.put(st)


def _eager_fits(st: WorkflowState | None, cmd: Command, eager: EagerWorkflowTask, ts: int) -> TypeGuard[WorkflowState]:
    """Did nothing happen to the workflow since the workflow task the worker's instance last
    completed? Every event its code would have to see (a signal, a timer, another activity's
    result, a cancel request, a child's news) schedules a workflow task at once when none is
    pending, so "no task pending or failed since that one completed" is exactly that."""
    if not (
        st is not None
        and st["status"] == "running"
        and st["run_id"] == cmd["run_id"]
        and st["wt_scheduled_seq"] is None
        and not st["wt_needed"]
        and st["wt_failure"] is None
        and not st["paused"]
        and eager["build_id"] == st["build_id"]
        and abs(eager["workflow_time_ms"] - ts) <= EAGER_MAX_SKEW_MS
    ):
        return False
    if eager.get("base_request_id") is not None:  # it follows an eager task the worker has no news of yet
        return bool(st.get("wt_last_eager_request") == eager["base_request_id"])
    return bool(st["wt_last_completed_seq"] == eager["base_scheduled_seq"])


def _activity_completed(t: Transition, body: RespondActivityTaskCompleted) -> None:
    """An activity's result, maybe with the eager workflow task its worker ran next (decision 0031):
    recorded as ActivityTaskCompleted, WorkflowTaskScheduled (at the workflow time the code ran
    with), WorkflowTaskCompleted and the task's commands, the history a workflow task sent
    through Kafka would have left. Refused when the workflow moved on meanwhile: then only the
    result is recorded, and the next workflow task carries the whole history (the worker's
    instance ran ahead on a history that did not happen)."""
    eager = body.get("eager_workflow_task")
    if eager is None:
        activity_result(t, body, failed=False)
        return
    asked, mark = eager_requests(eager["commands"]), len(t.out.tasks)
    st = t.view.state(t.cmd["aggregate_key"])
    if not _eager_fits(st, t.cmd, eager, t.ts):
        if activity_result(t, body, failed=False, task="full"):
            t.out.eager_refused += 1
    elif activity_result(t, body, failed=False, task="none"):
        _record_eager_task(t, st, eager, body["identity"], t.cmd["request_id"])
    if asked:
        send_eager(t, mark, asked, t.cmd["aggregate_key"], t.cmd["run_id"])


def _check_history_size(t: Transition, st: WorkflowState) -> None:
    size = st["next_seq"] - 1
    if size >= HISTORY_LIMIT_EVENTS:
        failure = _failure(
            "HistoryLimitExceeded",
            f"history of run {st['run_id']} reached {size} events (limit {HISTORY_LIMIT_EVENTS}); "
            "use workflow.continue_as_new() to start a fresh run with the current state",
        )
        nxt = cron_run_id(st)
        emit(t, st, "WorkflowExecutionFailed", {"failure": failure, "new_run_id": nxt})
        close_or_continue(t, st, "failed", nxt, failure=failure)
    elif size >= HISTORY_WARN_EVENTS and not st["history_warned"]:
        st["history_warned"] = True
        log.warning(
            "workflow %s run %s: history has %d events (limit %d): consider workflow.continue_as_new()",
            st["workflow_id"],
            st["run_id"],
            size,
            HISTORY_LIMIT_EVENTS,
        )


def _workflow_task_failed(t: Transition, body: RespondWorkflowTaskFailed) -> None:
    st = _current_task(t, body)
    if st is None:
        return
    # Not recorded in history: the history stays exactly as the workflow's code last agreed with.
    # The failure is on the state for operators. The next event schedules a new attempt, and so
    # does a retry timer with exponential backoff (decision 0003, processors.task_retry): fixed
    # code deployed at any time picks the run up without an operator, within the backoff's cap.
    failed_seq, attempt = st["wt_scheduled_seq"], st["wt_attempt"]
    assert failed_seq is not None, "the failed task is the pending one (_current_task)"
    st["wt_scheduled_seq"] = None
    st["wt_failure"] = body["failure"]
    st["wt_failure_cause"] = body["cause"]
    delay = t.view.task_retry.delay_ms(attempt)
    start_timer(
        t.out,
        st,
        f"workflow-task-retry/{failed_seq}/{attempt}",
        t.ts + delay,
        "workflow_task_retry",
        scheduled_seq=failed_seq,
        attempt=attempt,
    )
    t.view.put(st)
    log.warning(
        "workflow %s run %s: workflow task attempt %d failed (%s): %s; retry in %.1f s",
        st["workflow_id"],
        st["run_id"],
        attempt,
        body["cause"],
        body["failure"]["type"],
        delay / 1000,
    )


def _history_requested(t: Transition, body: RequestWorkflowHistory) -> None:
    st = _current_task(t, body)
    if st is not None:
        dispatch_workflow_task(t, st, full=True)


def _await_result(t: Transition, body: AwaitWorkflowResult) -> None:
    wf, rid = t.cmd["aggregate_key"], t.cmd["request_id"]
    st = t.view.state(wf)
    if st is None or (t.cmd["run_id"] and t.cmd["run_id"] != st["run_id"]):
        reply(t.out, rid, wf, "not_found", message=f"workflow {wf!r} not found")
        return
    if st["status"] != "running":
        reply(
            t.out,
            rid,
            wf,
            st["status"],
            run_id=st["run_id"],
            result=st["result"],
            failure=st["failure"],
            memo=st["memo"],
            description=None if body["wait"] else description(st, t.out),
        )
    elif not body["wait"]:
        # a running workflow whose last workflow task failed (e.g. non-determinism) says so
        reply(
            t.out,
            rid,
            wf,
            "running",
            run_id=st["run_id"],
            message=st["wt_failure_cause"] or "",
            failure=st["wt_failure"],
            memo=st["memo"],
            description=description(st, t.out),
        )
    elif rid and rid not in st["result_waiters"]:
        st["result_waiters"].append(rid)
        if len(st["result_waiters"]) > MAX_RESULT_WAITERS:
            del st["result_waiters"][0]
        t.view.put(st)


def _signal(t: Transition, body: SignalWorkflow) -> None:
    wf, rid = t.cmd["aggregate_key"], t.cmd["request_id"]
    st = t.view.state(wf)
    if deduplicated(st, t.cmd, t.out, t.view):
        return
    if st is None or st["status"] != "running" or (t.cmd["run_id"] and t.cmd["run_id"] != st["run_id"]):
        if body["start"] is None:
            if st is None:
                reply(t.out, rid, wf, "not_found", message=f"no open run of workflow {wf!r} (it never ran)")
            else:  # a closed run (or an earlier run of the workflow): 409 not_running over HTTP
                reply(t.out, rid, wf, "rejected", run_id=st["run_id"], message=closed_message(st, t.cmd["run_id"]))
            return
        st = _start(t.for_command({**t.cmd, "request_id": None}), body["start"], answer=False)
        if st is None:  # pragma: no cover - no open run, so a start cannot be rejected as running
            reply(t.out, rid, wf, "rejected", message="signal-with-start could not start the workflow")
            return
    st["signals_seen"] += 1
    emit(
        t,
        st,
        "WorkflowSignaled",
        {"signal_name": body["signal_name"], "input": body["input"], "identity": body["identity"]},
        request_id=rid,
    )
    workflow_task_needed(t, st)
    remember(st, rid, "ok")
    t.view.put(st)
    reply(t.out, rid, wf, "ok", run_id=st["run_id"])


def _request_cancel(t: Transition, body: RequestCancelWorkflow) -> None:
    st = open_run_or_reply(t)
    if st is None:
        return
    if not st["cancel_requested"]:
        st["cancel_requested"] = True
        emit(t, st, "WorkflowCancelRequested", {"reason": body["reason"]}, request_id=t.cmd["request_id"])
        workflow_task_needed(t, st)
    remember(st, t.cmd["request_id"], "ok")
    t.view.put(st)
    reply(t.out, t.cmd["request_id"], st["workflow_id"], "ok", run_id=st["run_id"])


def _terminate_run(t: Transition, st: WorkflowState, reason: str, identity: str = "") -> None:
    emit(t, st, "WorkflowExecutionTerminated", {"reason": reason, "identity": identity})
    close_run(t, st, "terminated", failure=_failure("Terminated", reason or "terminated"))
    t.view.put(st)


def _terminate(t: Transition, body: TerminateWorkflow) -> None:
    st = open_run_or_reply(t)
    if st is None:
        return
    log.warning("workflow %s run %s terminated by %s", st["workflow_id"], st["run_id"], body["identity"] or "unknown")
    _terminate_run(t, st, body["reason"], body["identity"])
    remember(st, t.cmd["request_id"], "ok")
    reply(t.out, t.cmd["request_id"], st["workflow_id"], "ok", run_id=st["run_id"])


def _fail_run(t: Transition, st: WorkflowState, failure: Failure) -> None:
    """The engine fails the run (a concurrency slot it asked for was refused)."""
    emit(t, st, "WorkflowExecutionFailed", {"failure": failure, "new_run_id": None})
    close_run(t, st, "failed", failure=failure)


def _timer_fired(t: Transition, body: FireTimer) -> None:
    st = t.view.state(t.cmd["aggregate_key"])
    if st is None or st["status"] != "running" or st["run_id"] != t.cmd["run_id"]:
        t.out.stale += 1
        return
    if st["paused"]:
        if hold_timer(st, body):
            t.view.put(st)
        return
    if fire_timer(t, st, body):
        if st["continued_run_id"] is None:  # else the next run's state is already staged
            t.view.put(st)
    else:
        t.out.stale += 1


def fire_timer(t: Transition, st: WorkflowState, body: Mapping[str, Any]) -> bool:
    """Apply a due timer of the open run ``st``; False if it no longer applies (stale)."""
    kind = body["kind"]
    if kind == "user":
        timer = next((x for x in st["pending_timers"] if x["timer_id"] == body["timer_id"]), None)
        if timer is None:  # fired twice, or fired after it was cancelled: changes nothing
            return False
        st["pending_timers"].remove(timer)
        emit(t, st, "TimerFired", {"timer_id": timer["timer_id"], "started_seq": timer["started_seq"]})
        workflow_task_needed(t, st)
    elif kind in ("run_timeout", "execution_timeout"):
        which = "run" if kind == "run_timeout" else "execution"
        nxt = cron_run_id(st) if which == "run" else None  # the execution timeout spans the whole chain
        emit(t, st, "WorkflowExecutionTimedOut", {"timeout_type": which, "new_run_id": nxt})
        close_or_continue(t, st, "timed_out", nxt, failure=_failure("TimeoutError", f"workflow {which} timeout"))
    elif kind == "cron_start":  # a cron run's time, a rate limit's admission, a debounce's end
        at = st.get("first_task_at_ms")
        if at is None or at > body["fire_at_ms"]:  # fired twice, or a later time still to come
            return False
        st["first_task_at_ms"] = st["throttled_until_ms"] = st["debounce_until_ms"] = None
        schedule_workflow_task(t, st, full=True)
    elif kind == "workflow_task_retry":
        # only while the task that failed is still the workflow's last one (nothing scheduled since)
        if st["wt_scheduled_seq"] is not None or st["wt_failure"] is None or st["wt_attempt"] != body["attempt"]:
            return False
        schedule_workflow_task(t, st, full=True, attempt=body["attempt"] + 1)
    elif not activity_timer_fired(t, st, body):
        return False
    return True


def _query(t: Transition, body: QueryWorkflow) -> None:
    wf, rid = t.cmd["aggregate_key"], t.cmd["request_id"]
    st = t.view.state(wf)
    if st is None:
        reply(t.out, rid, wf, "not_found", message=f"workflow {wf!r} not found")
        return
    # answered by a worker from the workflow's state; nothing is written to history. A closed run
    # (the workflow's last one) is answered from its final state, replayed from its history, as
    # Temporal does; an archived run has no state here and is not found
    dispatch_workflow_task(
        t, st, full=True, query={"request_id": rid or "", "query_name": body["query_name"], "input": body["input"]}
    )


def _update_build(t: Transition, body: UpdateWorkflowBuild) -> None:
    """Operator: move the open run to another build (None: unpin). A workflow task waiting on the
    old build's topic is sent again, with the full history, to the new build's; one that failed
    (e.g. non-determinism on the old build) is tried again on the new build at once."""
    st = open_run_or_reply(t)
    if st is None:
        return
    try:
        build = validate_build_id(body["build_id"], allow_none=True)
    except ConfigError as exc:
        reply(t.out, t.cmd["request_id"], st["workflow_id"], "rejected", run_id=st["run_id"], message=str(exc))
        return
    previous = st["build_id"]
    if build != previous:
        st["build_id"] = build
        if st["wt_scheduled_seq"] is not None:
            dispatch_workflow_task(t, st, full=True)
        elif st["wt_failure"] is not None:
            schedule_workflow_task(t, st, full=True)
        log.warning(
            "audit: workflow %s run %s moved from build %s to %s by %s",
            st["workflow_id"],
            st["run_id"],
            previous or "(unversioned)",
            build or "(unversioned)",
            body["identity"] or "unknown",
        )
    remember(st, t.cmd["request_id"], "ok")
    t.view.put(st)
    reply(t.out, t.cmd["request_id"], st["workflow_id"], "ok", run_id=st["run_id"])


def _purge_closed_run(t: Transition, body: PurgeClosedRun) -> None:
    """Archival: forget a closed run's state once its history is archived (a tombstone on
    ``{ns}.state``). Only the workflow's current run, and only once it is closed: a newer run's
    state is kept (answered ok, nothing to forget), an open run is refused, an unknown one is
    not_found (e.g. purged already: a retried purge changes nothing)."""
    wf, rid = t.cmd["aggregate_key"], t.cmd["request_id"]
    st = t.view.state(wf)
    if st is None:
        reply(t.out, rid, wf, "not_found", message=f"workflow {wf!r} has no state")
    elif st["run_id"] != body["run_id"]:
        reply(t.out, rid, wf, "ok", run_id=st["run_id"], message="the workflow has a newer run; its state is kept")
    elif st["status"] == "running":
        reply(t.out, rid, wf, "rejected", run_id=st["run_id"], message="the run is open")
    else:
        t.view.purge(wf)
        reply(t.out, rid, wf, "ok", run_id=st["run_id"])
        log.info("workflow %s run %s: state purged (archived at %s)", wf, st["run_id"], body["archive_uri"])


#: a command's handler: (the transition, the command's body)
_Handler = Callable[[Transition, Any], None]

_HANDLERS: dict[str, _Handler] = {
    "RespondWorkflowTaskCompleted": _workflow_task_completed,
    "RespondWorkflowTaskFailed": _workflow_task_failed,
    "RequestWorkflowHistory": _history_requested,
    "AwaitWorkflowResult": _await_result,
    "SignalWorkflow": _signal,
    "RequestCancelWorkflow": _request_cancel,
    "TerminateWorkflow": _terminate,
    "FireTimer": _timer_fired,
    "QueryWorkflow": _query,
    "RecordActivityHeartbeat": activity_heartbeat,
    "ChildWorkflowEvent": child_event,
    "ResetWorkflow": reset_workflow,
    "UpdateWorkflowBuild": _update_build,
    "PurgeClosedRun": _purge_closed_run,
    "AcceptWorkflowUpdate": update_accepted,
    "PauseWorkflow": pause_workflow,
    "UnpauseWorkflow": lambda t, body: unpause_workflow(t, body, fire=fire_timer),
    "ConcurrencySlot": lambda t, body: concurrency_command(
        t, body, fail=_fail_run, dispatch=dispatch_attempt, fail_activity=fail_activity
    ),
}


def transition(cmd: dict[str, Any], view: BatchView, out: Outbox, ts: int) -> None:
    """Apply one decoded ``Command`` to the shard."""
    btype, body = cmd["body"]
    t = Transition(cast(Command, cmd), view, out, ts)  # a decoded Command record
    key = cmd["aggregate_key"]
    if is_activity_key(key):  # a standalone activity's run: the engine decides for it
        if not refused(t, btype):
            _apply(t, btype, body)
            settle(t, key)
        return
    _apply(t, btype, body)


def _apply(t: Transition, btype: str, body: Any) -> None:
    if btype == "StartWorkflow":
        _start(t, body)
    elif btype == "RespondActivityTaskCompleted":
        _activity_completed(t, body)
    elif btype == "RespondActivityTaskFailed":
        activity_result(t, body, failed=True)
    elif btype == "UpdateWorkflow":
        update_requested(t, body, start=_start)
    else:
        handler = _HANDLERS.get(btype)
        if handler is None:  # pragma: no cover - the schema's union admits nothing else
            raise ValueError(f"unknown command {btype}")
        handler(t, body)
