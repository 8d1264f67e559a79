"""How a run begins, and how one run follows another: a start's new run (its state, its first
events, timers and workflow task, or for a cron run the timer of its first time), a
continue-as-new, and a close that, for a cron run, starts the chain's next run (``close_or_continue``).
The state machine (``processors.state_machine``) calls these from its transitions."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from kadence.schemas.records import StartWorkflow, WorkflowSignaled, WorkflowState
from kadence.topics.builds import validate_build_id
from kadence.topics.cron import next_time_ms
from kadence.topics.errors import ConfigError
from kadence.topics.records import RUN_NAMESPACE

from .closing import close_run
from .effects import Transition, emit, schedule_workflow_task, start_timer, workflow_task_needed

__all__ = [
    "RUN_NAMESPACE",
    "begin_run",
    "carry_slots",
    "close_or_continue",
    "continue_as_new",
    "cron_run_id",
    "initial_build",
    "new_run",
]

log = logging.getLogger(__name__)


def new_run(
    st_prev: WorkflowState | None,
    wf: str,
    body: Mapping[str, Any],
    run_id: str,
    ts: int,
    *,
    build_id: str | None = None,
) -> WorkflowState:
    return {
        "workflow_id": wf,
        "run_id": run_id,
        "workflow_type": body["workflow_type"],
        "task_queue": body["task_queue"],
        "status": "running",
        "start_time_ms": ts,
        "close_time_ms": None,
        "next_seq": 1,
        "wt_scheduled_seq": None,
        "wt_attempt": 0,
        "wt_last_completed_seq": 0,
        "wt_needed": False,
        "wt_failure": None,
        "wt_failure_cause": None,
        "pending_activities": [],
        "recent_requests": list(st_prev["recent_requests"]) if st_prev else [],
        "result": None,
        "failure": None,
        "result_waiters": [],
        "pending_timers": [],
        "cancel_requested": False,
        "signals_seen": 0,
        "continued_run_id": None,
        "history_warned": False,
        "run_timeout_ms": body.get("run_timeout_ms"),
        "search_attributes": dict(body.get("search_attributes") or {}),
        "execution_deadline_ms": (ts + body["execution_timeout_ms"]) if body.get("execution_timeout_ms") else None,
        "pending_children": [],
        "parent_workflow_id": body.get("parent_workflow_id"),
        "parent_run_id": body.get("parent_run_id"),
        "parent_initiated_seq": body.get("parent_initiated_seq") or 0,
        "build_id": build_id,
        "wt_last_eager_request": None,
        "trace_id": None,
        "span_id": None,
        "updates": [],
        "memo": dict(body.get("memo") or {}),
        "headers": dict(body.get("headers") or {}),
        "paused": False,
        "held_timers": [],
        "history_bytes": 0,
        "cron_schedule": body.get("cron_schedule"),
        "cron_input": body["input"] if body.get("cron_schedule") else None,
        "first_task_at_ms": None,
        "concurrency": [],
        "slots_held": 0,
        "slot_ticket": None,
        "slot_wait_since_ms": None,
        "throttled_until_ms": None,
        "priority": body.get("priority"),
        "streams_used": False,
    }


def carry_slots(st: WorkflowState, new: WorkflowState) -> None:
    """The next run of a chain (continue-as-new, a cron run's next) keeps the chain's
    concurrency slots, and its request for the one it still waits for, and whether the chain
    published on a stream (its final close ends them: ``processors.streams``)."""
    for key in ("concurrency", "slots_held", "slot_ticket", "slot_wait_since_ms", "streams_used"):
        new[key] = st[key]


def initial_build(t: Transition, body: StartWorkflow) -> str | None:
    """The build a new run is pinned to: the one its start names (a child of a pinned parent),
    else the task queue's default build at this moment (None: unversioned)."""
    if body.get("build_id"):
        try:
            return validate_build_id(body["build_id"])
        except ConfigError:
            log.warning("start names an invalid build %r; using the queue's default", body["build_id"])
    return t.view.build_defaults.get(body["task_queue"])


def begin_run(
    t: Transition,
    st: WorkflowState,
    body: Mapping[str, Any],
    *,
    request_id: str | None = None,
    continued_from: str | None = None,
    first_task: bool = True,
) -> None:
    t.view.put(st)
    if st["cron_schedule"]:  # a cron run: its code first runs at the schedule's next time
        st["first_task_at_ms"] = next_time_ms(st["cron_schedule"], t.ts)
    emit(
        t,
        st,
        "WorkflowExecutionStarted",
        {
            "workflow_type": body["workflow_type"],
            "task_queue": body["task_queue"],
            "input": body["input"],
            "attempt": 1,
            "continued_from_run_id": continued_from,
            "run_timeout_ms": body.get("run_timeout_ms"),
            "build_id": st["build_id"],
            "search_attributes": body.get("search_attributes") or {},
            "execution_deadline_ms": st["execution_deadline_ms"],
            "parent_workflow_id": st["parent_workflow_id"],
            "parent_run_id": st["parent_run_id"],
            "memo": st["memo"],
            "headers": st["headers"],
            "cron_schedule": st["cron_schedule"],
            "first_task_at_ms": st["first_task_at_ms"],
            "concurrency": st["concurrency"],
            "priority": st["priority"],
        },
        request_id=request_id,
    )
    if st["run_timeout_ms"]:  # a cron run's counts from when its code first runs, as Temporal's
        begins = st["first_task_at_ms"] or t.ts
        start_timer(t.out, st, f"run.{st['run_id']}", begins + st["run_timeout_ms"], "run_timeout")
    if st["execution_deadline_ms"]:
        start_timer(t.out, st, f"exec.{st['run_id']}", st["execution_deadline_ms"], "execution_timeout")
    if st["first_task_at_ms"] is not None:
        start_timer(t.out, st, f"cron.{st['run_id']}", st["first_task_at_ms"], "cron_start")
    elif first_task:  # (else the caller records the first task: an eager start's)
        schedule_workflow_task(t, st, full=True)
    log.debug("workflow %s run %s started", st["workflow_id"], st["run_id"])


def continue_as_new(
    t: Transition, st: WorkflowState, c: Mapping[str, Any], *, carried_signals: list[dict[str, Any]] | None = None
) -> None:
    """Close ``st`` into a new run with ``c``'s input; ``carried_signals`` (signal events of ``st``
    its code never saw) are recorded again in the new run, with their request IDs, for its code."""
    new_run_id = str(uuid.uuid5(RUN_NAMESPACE, f"{st['run_id']}/continue"))
    emit(t, st, "WorkflowExecutionContinuedAsNew", {"new_run_id": new_run_id, "input": c["input"]})
    waiters = st["result_waiters"]
    close_run(t, st, "continued_as_new", notify=False, keep_slots=True)
    st["result_waiters"] = []
    st["continued_run_id"] = new_run_id
    body = {
        "workflow_type": st["workflow_type"],
        "task_queue": st["task_queue"],
        "input": c["input"],
        "run_timeout_ms": st["run_timeout_ms"],
        "search_attributes": st["search_attributes"],
        "memo": st["memo"],
        "headers": st["headers"],
        "priority": st.get("priority"),  # the chain keeps its priority
    }
    new = new_run(st, st["workflow_id"], body, new_run_id, t.ts, build_id=st["build_id"])  # stays on its build
    new["execution_deadline_ms"] = st["execution_deadline_ms"]  # the deadline spans the whole chain
    new["cron_schedule"], new["cron_input"] = st.get("cron_schedule"), st.get("cron_input")  # runs now, stays a cron
    for key in ("parent_workflow_id", "parent_run_id", "parent_initiated_seq"):  # the parent waits for the chain
        new[key] = st[key]
    new["result_waiters"] = waiters  # whoever waits for "the workflow" waits for its last run
    carry_slots(st, new)
    begin_run(t, new, body, continued_from=st["run_id"])
    for ev in carried_signals or ():
        new["signals_seen"] += 1
        signaled: WorkflowSignaled = ev["attributes"][1]  # (continue_as_new carries signal events only)
        emit(t, new, "WorkflowSignaled", {**signaled}, request_id=ev.get("request_id"))
    if carried_signals:
        workflow_task_needed(t, new)
        t.view.put(new)


def cron_run_id(st: WorkflowState) -> str | None:
    """The run that follows ``st`` if it is a cron run (its completion, failure or run timeout
    starts the next one; a cancel, a terminate or the execution timeout ends the chain)."""
    return str(uuid.uuid5(RUN_NAMESPACE, f"{st['run_id']}/cron")) if st.get("cron_schedule") else None


def close_or_continue(t: Transition, st: WorkflowState, status: str, next_run_id: str | None, **outcome: Any) -> None:
    """Close the run ``st`` with ``status``; with ``next_run_id`` (a cron run) the workflow goes on
    in a new run with the same input, whose code runs at the schedule's next time. Whoever waits
    for the workflow's result (a client, a parent) waits for the chain, as after a continue-as-new."""
    if next_run_id is None:
        close_run(t, st, status, **outcome)
        return
    waiters = st["result_waiters"]
    close_run(t, st, status, notify=False, notify_parent=False, keep_slots=True, **outcome)
    st["result_waiters"] = []
    st["continued_run_id"] = next_run_id
    body = {
        "workflow_type": st["workflow_type"],
        "task_queue": st["task_queue"],
        "input": st.get("cron_input") or b"",
        "run_timeout_ms": st["run_timeout_ms"],
        "search_attributes": st["search_attributes"],
        "memo": st["memo"],
        "headers": st["headers"],
        "cron_schedule": st.get("cron_schedule"),
        "priority": st.get("priority"),
    }
    # a fresh run on the queue's default build (deployed fixes reach the next run), keeping the
    # chain's deadline and parent
    new = new_run(st, st["workflow_id"], body, next_run_id, t.ts, build_id=t.view.build_defaults.get(st["task_queue"]))
    new["execution_deadline_ms"] = st["execution_deadline_ms"]
    for key in ("parent_workflow_id", "parent_run_id", "parent_initiated_seq"):
        new[key] = st[key]
    new["result_waiters"] = waiters
    carry_slots(st, new)
    begin_run(t, new, body, continued_from=st["run_id"])
