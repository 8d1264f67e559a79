"""Queries and update validations, answered by a worker (and by ``kadence.testing``) from a
workflow's state; nothing is written to history.

The engine sends either as a workflow task with ``query`` set (``query.update`` for an update's
validation) and the run's full history. ``answer`` uses the cached instance when it has seen
every recorded event, else a throw-away replay that also applies the events recorded since the
last workflow task, so a query sent after a signal was acknowledged sees it (read your writes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kadence.schemas.records import WorkflowTask
from kadence.topics.errors import KadenceError
from kadence.topics.payload import PayloadConverter

from ._definitions import WorkflowDefinition
from ._instance import WorkflowInfo, WorkflowInstance

__all__ = ["answer", "with_pending_activation"]


def with_pending_activation(events: Sequence[Mapping[str, Any]]) -> tuple[Sequence[Mapping[str, Any]], int]:
    """A query's history and the workflow task to activate at its end, so that the events recorded
    since the last workflow task (signals, results) reach the code before the query is answered.

    When the history ends with a scheduled workflow task, that one; otherwise a provisional one
    after the last event (it exists only in this throw-away replay; its commands are dropped)."""
    if not events:
        return events, -1
    last = events[-1]
    if last["attributes"][0] == "WorkflowTaskScheduled":
        return events, last["seq"]
    pending = {
        **last,
        "seq": last["seq"] + 1,
        "attributes": ("WorkflowTaskScheduled", {"task_queue": "", "attempt": 1}),
    }
    return [*events, pending], pending["seq"]


def _usable(inst: WorkflowInstance | None, task: WorkflowTask) -> bool:
    events = task["events"]
    recorded = events[-1]["seq"] if events else 0
    return (
        inst is not None
        and inst.info.run_id == task["run_id"]
        and inst.eager_token is None
        and inst.last_seq >= recorded
    )


def answer(
    task: WorkflowTask,
    defn: WorkflowDefinition | None,
    cached: WorkflowInstance | None,
    converter: PayloadConverter,
    *,
    unreadable: BaseException | None = None,
    interceptors: tuple[Any, ...] = (),
    failure_types: tuple[type[BaseException], ...] = (),
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the reply to produce, the ``AcceptWorkflowUpdate`` body to send): a query's reply (its
    result, or ``failed``); an update's rejection (``rejected``, the validator's error) or its
    acceptance (no reply: the update's completion answers the caller). ``unreadable``: why a
    closed run's history could not be read (the reply is that failure)."""
    q = task["query"]
    assert q is not None, "answer() is given query tasks"
    is_update = bool(q.get("update"))
    reply: dict[str, Any] = {
        "request_id": q["request_id"],
        "workflow_id": task["workflow_id"],
        "run_id": task["run_id"],
        "status": "ok",
        "message": "",
        "history_offset": None,
        "result": None,
        "failure": None,
        "history_seq": None,
    }
    temp = None
    try:
        if unreadable is not None:
            raise KadenceError(f"the history of closed run {task['run_id']} could not be read: {unreadable}")
        if defn is None:
            raise KadenceError(f"workflow type {task['workflow_type']!r} is not registered on this worker")
        inst = cached if _usable(cached, task) else None
        if inst is None:
            temp = inst = WorkflowInstance(
                defn,
                WorkflowInfo(task["workflow_id"], task["run_id"], task["workflow_type"], task["task_queue"]),
                converter,
                interceptors,
                failure_types,
            )
            inst.throwaway = True  # its replay logs nothing: the worker's instance did, once
            inst.apply(*with_pending_activation(task["events"]))
        if is_update:
            inst.validate_update(q["query_name"], q["input"])
            return None, {"update_name": q["query_name"], "input": q["input"]}
        reply["result"] = converter.to_bytes(inst.query(q["query_name"], q["input"]))
    except Exception as exc:  # noqa: BLE001 - the caller gets the error, the worker carries on
        reply["status"] = "rejected" if is_update else "failed"
        reply["message"] = str(exc)
        reply["failure"] = converter.failure(exc)
    finally:
        if temp is not None:
            temp.discard()
    return reply, None
