"""Workflow updates: a validated request into a running workflow that returns its handler's result.

The flow, each step exactly once on the workflow's partition:

1. ``UpdateWorkflow`` (the client's; its request ID is the update's ID): nothing is recorded; a
   worker is sent a validation task (a query-like workflow task, ``query.update``), which runs
   the update's validator on the workflow's current state. A rejection is answered by the worker
   straight to the caller: the history never hears of it.
2. ``AcceptWorkflowUpdate`` (the worker's, once the validator passed): ``WorkflowUpdateAccepted``
   is recorded and a workflow task scheduled; the handler runs in workflow code.
3. The handler returns or raises: the workflow task's ``CompleteWorkflowUpdate`` records
   ``WorkflowUpdateCompleted`` and answers the caller with the result or the failure.

The run's state keeps each accepted update (``updates``), so a retried request (the same ID) is
answered with the same outcome, and an accept that arrives twice (two validations of one
retried request) records nothing the second time. A run that closes with an update still
running answers it with a failure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from kadence.schemas.records import AcceptWorkflowUpdate, UpdateRecord, UpdateWorkflow, WorkflowState
from kadence.topics.records import failure_record

from .effects import (
    Outbox,
    Transition,
    closed_message,
    dispatch_workflow_task,
    emit,
    reply,
    workflow_task_needed,
)

__all__ = ["UPDATES_KEPT", "complete_update", "fail_open_updates", "update_accepted", "update_requested"]

log = logging.getLogger(__name__)

#: finished updates a run remembers (the oldest are forgotten first); open ones are always kept
UPDATES_KEPT = 100


def _find(st: WorkflowState | None, update_id: str | None) -> UpdateRecord | None:
    if st is None or not update_id:
        return None
    return next((u for u in st["updates"] if u["update_id"] == update_id), None)


def _answer(out: Outbox, st: WorkflowState, u: UpdateRecord) -> None:
    if u["status"] == "completed":
        reply(out, u["update_id"], st["workflow_id"], "ok", run_id=st["run_id"], result=u["result"])
    else:
        failure = u["failure"]
        reply(
            out,
            u["update_id"],
            st["workflow_id"],
            "failed",
            run_id=st["run_id"],
            message=failure["message"] if failure else "",
            failure=failure,
        )


def update_requested(t: Transition, body: UpdateWorkflow, *, start: Callable[..., WorkflowState | None]) -> None:
    """``UpdateWorkflow``: answer a known update from its record, else have a worker validate it
    (``start``: the start of update-with-start, when no run is open)."""
    wf, uid = t.cmd["aggregate_key"], t.cmd["request_id"]
    if not uid:
        log.warning("workflow %s: an update without a request ID is ignored", wf)
        return
    st = t.view.state(wf)
    known = _find(st, uid)
    if known is not None and st is not None:
        t.out.duplicates += 1
        if known["status"] != "accepted":
            _answer(t.out, st, known)
        return  # still running: its completion answers every request with this ID
    if st is None or st["status"] != "running" or (t.cmd["run_id"] and t.cmd["run_id"] != st["run_id"]):
        if body["start"] is None:
            if st is None:
                reply(t.out, uid, wf, "not_found", message=f"no open run of workflow {wf!r} (it never ran)")
            else:
                reply(t.out, uid, wf, "rejected", run_id=st["run_id"], message=closed_message(st, t.cmd["run_id"]))
            return
        st = start(t.for_command({**t.cmd, "request_id": None}), body["start"], answer=False)
        if st is None:  # pragma: no cover - no open run, so a start cannot be refused as running
            reply(t.out, uid, wf, "rejected", message="update-with-start could not start the workflow")
            return
        t.view.put(st)
    dispatch_workflow_task(
        t,
        st,
        full=True,
        query={"request_id": uid, "query_name": body["update_name"], "input": body["input"], "update": True},
    )


def update_accepted(t: Transition, body: AcceptWorkflowUpdate) -> None:
    """``AcceptWorkflowUpdate``: record the update once, and run its handler."""
    wf, uid = t.cmd["aggregate_key"], t.cmd["request_id"]
    st = t.view.state(wf)
    if st is None or not uid:
        t.out.stale += 1
        return
    if _find(st, uid) is not None:
        t.out.duplicates += 1  # validated twice (a retried request): recorded once
        return
    if st["status"] != "running" or (t.cmd["run_id"] and t.cmd["run_id"] != st["run_id"]):
        reply(t.out, uid, wf, "rejected", run_id=st["run_id"], message=closed_message(st, t.cmd["run_id"]))
        return
    emit(
        t,
        st,
        "WorkflowUpdateAccepted",
        {"update_id": uid, "update_name": body["update_name"], "input": body["input"], "identity": body["identity"]},
        request_id=uid,
    )
    st["updates"].append(
        {"update_id": uid, "update_name": body["update_name"], "status": "accepted", "result": None, "failure": None}
    )
    workflow_task_needed(t, st)
    t.view.put(st)


def _forget_finished(st: WorkflowState) -> None:
    finished = [u for u in st["updates"] if u["status"] != "accepted"]
    if len(finished) > UPDATES_KEPT:
        drop = {id(u) for u in finished[: len(finished) - UPDATES_KEPT]}
        st["updates"] = [u for u in st["updates"] if id(u) not in drop]


def complete_update(t: Transition, st: WorkflowState, c: Mapping[str, Any]) -> None:
    """Workflow code's ``CompleteWorkflowUpdate``: recorded (replay expects the event whatever
    happened to the update meanwhile); the first outcome of an accepted update answers it."""
    emit(
        t, st, "WorkflowUpdateCompleted", {"update_id": c["update_id"], "result": c["result"], "failure": c["failure"]}
    )
    u = _find(st, c["update_id"])
    if u is None or u["status"] != "accepted":
        return
    u["status"] = "completed" if c["failure"] is None else "failed"
    u["result"], u["failure"] = c["result"], c["failure"]
    _answer(t.out, st, u)
    _forget_finished(st)


def fail_open_updates(out: Outbox, st: WorkflowState, status: str) -> None:
    """The run closed (``status``) while updates were running: each fails, and is answered."""
    for u in st["updates"]:
        if u["status"] == "accepted":
            u["status"] = "failed"
            u["failure"] = failure_record(
                "UpdateNotCompleted",
                f"the workflow run closed ({status}) before the update {u['update_name']!r} finished",
            )
            _answer(out, st, u)
    _forget_finished(st)
