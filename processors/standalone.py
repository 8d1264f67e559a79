"""The history processor's side of a standalone activity (decision 0063, ``topics.standalone``):
a run with no workflow code, whose one activity the engine schedules in the start's transaction
and whose close the engine decides, in the transaction that records the activity's outcome.

``transition`` (``state_machine``) hands every command for an activity's key here: ``refused``
answers the ones such a run does not take (signals, queries, updates, resets, pauses: it has no
code to take them), and after the others ``settle`` looks at the run: a cancellation request
cancels the activity at once (the running attempt learns it at its next heartbeat, as a
workflow's ``TRY_CANCEL`` does); an activity that closed closes the run with its outcome."""

from __future__ import annotations

from typing import Any

from kadence.schemas.records import StartWorkflow, WorkflowState
from kadence.topics.records import failure_record
from kadence.topics.standalone import activity_id_of

from .activities import cancel_activity, schedule_activity
from .closing import close_run
from .effects import Transition, emit, reply

__all__ = ["COMMANDS", "begin_activity_run", "refused", "settle"]

#: the commands a standalone activity's run takes; any other is answered ``rejected``
COMMANDS = frozenset(
    {
        "StartWorkflow",
        "RespondActivityTaskCompleted",
        "RespondActivityTaskFailed",
        "RecordActivityHeartbeat",
        "AwaitWorkflowResult",
        "RequestCancelWorkflow",
        "TerminateWorkflow",
        "FireTimer",
        "PurgeClosedRun",
        "ConcurrencySlot",
    }
)

#: the events that close an activity, and the run's status and closing event for each
_CLOSES = {
    "ActivityTaskCompleted": "completed",
    "ActivityTaskFailed": "failed",
    "ActivityTaskTimedOut": "timed_out",
    "ActivityTaskCanceled": "canceled",
}


def refused(t: Transition, btype: str) -> bool:
    """True (after answering ``rejected``) for a command a standalone activity does not take."""
    if btype in COMMANDS:
        return False
    key = t.cmd["aggregate_key"]
    if t.cmd.get("request_id"):
        reply(t.out, t.cmd["request_id"], key, "rejected", message=f"a standalone activity takes no {btype}")
    return True


def begin_activity_run(t: Transition, st: WorkflowState, body: StartWorkflow) -> None:
    """Schedule the run's activity (right after its ``WorkflowExecutionStarted``)."""
    options = body.get("activity")
    assert options is not None  # (``standalone_problem`` refused a start without)
    scheduled = {
        "activity_id": activity_id_of(st["workflow_id"]),
        "activity_type": body["workflow_type"],
        "input": body["input"],
        "options": options,
    }
    schedule_activity(t, st, scheduled, 0)


def _outcome(t: Transition, st: WorkflowState) -> tuple[str, dict[str, Any]] | None:
    """The closing event of the run's activity recorded in this batch, as (type, attributes)."""
    for key, ev in reversed(t.out.events):
        if key == st["workflow_id"] and ev["run_id"] == st["run_id"] and ev["attributes"][0] in _CLOSES:
            etype, attrs = ev["attributes"]
            return str(etype), attrs
    return None


def settle(t: Transition, key: str) -> None:
    """After a command on an activity's run: cancel the activity if asked, close the run if the
    activity closed."""
    st = t.view.state(key)
    if st is None or st["status"] != "running":
        return
    if st["cancel_requested"] and st["pending_activities"]:
        cancel_activity(t, st, st["pending_activities"][0]["activity_id"])
    if st["pending_activities"]:
        return
    outcome = _outcome(t, st)
    if outcome is None:  # pragma: no cover - an activity leaves the run only by a closing event
        return
    etype, attrs = outcome
    status = _CLOSES[etype]
    if status == "completed":
        emit(t, st, "WorkflowExecutionCompleted", {"result": attrs["result"], "new_run_id": None})
        close_run(t, st, status, result=attrs["result"])
    elif status == "canceled":
        emit(t, st, "WorkflowExecutionCanceled", {"details": None})
        close_run(t, st, status, failure=failure_record("CancelledError", "activity canceled"))
    elif status == "timed_out":
        emit(t, st, "WorkflowExecutionTimedOut", {"timeout_type": attrs["timeout_type"], "new_run_id": None})
        close_run(t, st, status, failure=attrs["failure"])
    else:
        emit(t, st, "WorkflowExecutionFailed", {"failure": attrs["failure"], "new_run_id": None})
        close_run(t, st, status, failure=attrs["failure"])
    t.view.put(st)
