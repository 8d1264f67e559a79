"""Closing a run: ``close_run`` (its status, result and waiters answered, its open updates
failed, its children told by their parent-close policy, its parent notified), and the rule that
a workflow task that closes the run never outruns an acknowledged signal (decision 0053).

When signals or updates were recorded after the completed task was scheduled, its code never saw
them. A task that completes, fails or cancels the run then is refused (nothing of it recorded, a
new task with the whole history), as is one with an update unseen; a continue-as-new with only
signals unseen goes ahead and passes them to the next run (``runs.continue_as_new``)."""

from __future__ import annotations

import logging
from typing import Any

from kadence.schemas.records import Failure, RespondWorkflowTaskCompleted, WorkflowState
from kadence.topics.standalone import is_activity_key

from .concurrency import release_activity_slots, release_run_slots
from .effects import Outbox, Transition, reply, schedule_workflow_task, send_command
from .streams import end_streams
from .updates import fail_open_updates

__all__ = ["close_run", "closing_outruns_signals"]

log = logging.getLogger(__name__)

#: commands that end the run
CLOSING = frozenset(
    {
        "CompleteWorkflowExecution",
        "FailWorkflowExecution",
        "CancelWorkflowExecution",
        "ContinueAsNewWorkflowExecution",
    }
)
#: what a sender was told was accepted, and the code must see
_UNSEEN_KINDS = ("WorkflowSignaled", "WorkflowUpdateAccepted")


def closing_outruns_signals(
    t: Transition, st: WorkflowState, body: RespondWorkflowTaskCompleted
) -> tuple[bool, list[dict[str, Any]]]:
    """(refused, signals to carry): whether the completed task ``body`` was refused (and a new
    task scheduled), else the signal events a continue-as-new among its commands passes on."""
    if not st["wt_needed"]:  # nothing was recorded since the task was scheduled
        return False, []
    closing = next((ctype for ctype, _c in body["commands"] if ctype in CLOSING), None)
    if closing is None:
        return False, []
    since = body["scheduled_seq"]
    unseen = [e for e in t.view.history(st["workflow_id"], st["run_id"], since) if e["attributes"][0] in _UNSEEN_KINDS]
    if not unseen:
        return False, []
    updates = any(e["attributes"][0] == "WorkflowUpdateAccepted" for e in unseen)
    if closing == "ContinueAsNewWorkflowExecution" and not updates:
        return False, unseen
    st["wt_scheduled_seq"] = None
    t.out.closes_refused += 1
    log.info(
        "workflow %s run %s: a closing workflow task refused: %d signals or updates came after it",
        st["workflow_id"],
        st["run_id"],
        len(unseen),
    )
    schedule_workflow_task(t, st, full=True)
    t.view.put(st)
    return True, []


def _parent_close_policies(out: Outbox, st: WorkflowState) -> None:
    for child in st["pending_children"]:
        policy = child["parent_close_policy"]
        rid = f"parent-close:{st['run_id']}:{child['initiated_seq']}"
        if policy == "terminate":
            send_command(
                out,
                child["workflow_id"],
                "TerminateWorkflow",
                {"reason": f"parent {st['workflow_id']} closed", "identity": "parent-close-policy"},
                run_id=child["run_id"],
                request_id=rid,
            )
        elif policy == "request_cancel":
            send_command(
                out,
                child["workflow_id"],
                "RequestCancelWorkflow",
                {"reason": f"parent {st['workflow_id']} closed"},
                run_id=child["run_id"],
                request_id=rid,
            )
    st["pending_children"] = []


def close_run(
    t: Transition,
    st: WorkflowState,
    status: str,
    *,
    result: bytes | None = None,
    failure: Failure | None = None,
    notify: bool = True,
    notify_parent: bool = True,
    keep_slots: bool = False,
) -> None:
    """``keep_slots``: the run's concurrency slots pass to the chain's next run (continue-as-new,
    a cron run's next, a reset); its activities' slots go back all the same."""
    if keep_slots:
        for a in st["pending_activities"]:
            release_activity_slots(t, st, a)
    else:  # (kept: the chain goes on, with its slots and its streams)
        release_run_slots(t, st)
        end_streams(t, st)
    st["status"] = status
    st["close_time_ms"] = t.ts
    standalone = is_activity_key(st["workflow_id"])
    t.out.runs_closed.append((st["workflow_type"], status, t.ts - st["start_time_ms"], standalone))
    st["result"] = result
    st["failure"] = failure
    st["wt_scheduled_seq"] = None
    st["wt_needed"] = False
    st["pending_activities"] = []
    st["pending_timers"] = []
    st["paused"] = False
    st["held_timers"] = []
    if st.get("updates"):
        fail_open_updates(t.out, st, status)
    _parent_close_policies(t.out, st)
    if st["parent_workflow_id"] and status != "continued_as_new" and notify_parent:
        send_command(
            t.out,
            st["parent_workflow_id"],
            "ChildWorkflowEvent",
            {
                "initiated_seq": st["parent_initiated_seq"],
                "child_workflow_id": st["workflow_id"],
                "child_run_id": st["run_id"],
                "kind": status,
                "result": result,
                "failure": failure,
                "message": "",
            },
            run_id=st["parent_run_id"],
        )
    if notify:
        for rid in st["result_waiters"]:
            reply(t.out, rid, st["workflow_id"], status, run_id=st["run_id"], result=result, failure=failure)
        st["result_waiters"] = []
    log.debug("workflow %s run %s %s", st["workflow_id"], st["run_id"], status)
