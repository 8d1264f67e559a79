"""A parent and its children: a child's start sent from the parent's workflow task
(``start_child``, in the parent's transaction), the parent told of the child's start
(``notify_parent_of_start``), and the child's news recorded in the parent's history
(``child_event``). The child's close is told by ``closing.close_run``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kadence.schemas.records import ChildWorkflowEvent, StartWorkflow, WorkflowState
from kadence.topics.priority import inherit
from kadence.topics.records import failure_record

from .effects import Outbox, Transition, emit, send_command, workflow_task_needed

__all__ = ["child_event", "notify_parent_of_start", "start_child"]


def notify_parent_of_start(
    out: Outbox, wf: str, body: StartWorkflow, kind: str, run_id: str, message: str = ""
) -> None:
    parent = body.get("parent_workflow_id")
    if parent:
        send_command(
            out,
            parent,
            "ChildWorkflowEvent",
            {
                "initiated_seq": body["parent_initiated_seq"],
                "child_workflow_id": wf,
                "child_run_id": run_id,
                "kind": kind,
                "result": None,
                "failure": None,
                "message": message,
            },
            run_id=body["parent_run_id"],
        )


def start_child(t: Transition, st: WorkflowState, c: Mapping[str, Any], done_seq: int) -> None:
    ev = emit(
        t,
        st,
        "StartChildWorkflowExecutionInitiated",
        {
            "workflow_id": c["workflow_id"],
            "workflow_type": c["workflow_type"],
            "task_queue": c["task_queue"],
            "input": c["input"],
            "parent_close_policy": c["parent_close_policy"],
            "workflow_task_completed_seq": done_seq,
        },
    )
    st["pending_children"].append(
        {
            "workflow_id": c["workflow_id"],
            "initiated_seq": ev["seq"],
            "run_id": None,
            "parent_close_policy": c["parent_close_policy"],
        }
    )
    # the child's start goes to its own shard, in this transaction: a retried parent task
    # cannot start it twice (and its request ID makes a duplicate harmless anyway)
    send_command(
        t.out,
        c["workflow_id"],
        "StartWorkflow",
        {
            "workflow_type": c["workflow_type"],
            "task_queue": c["task_queue"],
            "input": c["input"],
            "id_reuse_policy": "allow_duplicate",
            "run_timeout_ms": c.get("run_timeout_ms"),
            "search_attributes": {},
            "execution_timeout_ms": None,
            "parent_workflow_id": st["workflow_id"],
            "parent_run_id": st["run_id"],
            "parent_initiated_seq": ev["seq"],
            "parent_close_policy": c["parent_close_policy"],
            "headers": st["headers"],  # the caller's context (interceptors) reaches the child too
            # a child on its parent's task queue runs on its parent's build; elsewhere on that queue's default
            "build_id": st["build_id"] if c["task_queue"] == st["task_queue"] else None,
            "concurrency": list(c.get("concurrency") or ()),
            # the child's priority: its own, the parent's where it leaves a field unset
            "priority": inherit(c.get("priority"), st.get("priority")),
        },
        request_id=f"child:{st['workflow_id']}:{st['run_id']}:{ev['seq']}",
    )


_CHILD_CLOSED = {"completed", "failed", "canceled", "terminated", "timed_out"}


def child_event(t: Transition, body: ChildWorkflowEvent) -> None:
    st = t.view.state(t.cmd["aggregate_key"])
    child = None
    if st is not None and st["status"] == "running" and st["run_id"] == t.cmd["run_id"]:
        child = next((c for c in st["pending_children"] if c["initiated_seq"] == body["initiated_seq"]), None)
    kind = body["kind"]
    if st is None or child is None or (kind == "started" and child["run_id"] is not None):
        t.out.stale += 1  # the parent moved on (closed, continued) or this is a duplicate
        return
    iseq, wid = child["initiated_seq"], child["workflow_id"]
    if kind == "started":
        started_run = body["child_run_id"]
        if started_run is None:  # the engine names the child's run in every "started" it sends
            t.out.stale += 1
            return
        child["run_id"] = started_run
        emit(t, st, "ChildWorkflowExecutionStarted", {"initiated_seq": iseq, "workflow_id": wid, "run_id": started_run})
    elif kind == "start_failed":
        st["pending_children"].remove(child)
        emit(
            t,
            st,
            "StartChildWorkflowExecutionFailed",
            {
                "initiated_seq": iseq,
                "workflow_id": wid,
                "cause": body["message"] or "already started",
                "run_id": body["child_run_id"],
            },
        )
    elif kind in _CHILD_CLOSED:
        st["pending_children"].remove(child)
        if kind == "completed":
            emit(
                t,
                st,
                "ChildWorkflowExecutionCompleted",
                {
                    "initiated_seq": iseq,
                    "workflow_id": wid,
                    "run_id": body["child_run_id"] or "",
                    "result": body["result"] or b"",
                },
            )
        else:
            failure = body["failure"] or failure_record(kind, f"child workflow {kind}")
            emit(
                t,
                st,
                "ChildWorkflowExecutionFailed",
                {
                    "initiated_seq": iseq,
                    "workflow_id": wid,
                    "run_id": body["child_run_id"] or "",
                    "status": kind,
                    "failure": failure,
                },
            )
    else:
        t.out.stale += 1
        return
    workflow_task_needed(t, st)
    t.view.put(st)
