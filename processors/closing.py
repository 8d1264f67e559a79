"""A workflow task that closes the run never outruns an acknowledged signal (decision 0053).

When signals or updates were recorded after the completed task was scheduled, its code never saw
them. A task that completes, fails or cancels the run then is refused (nothing of it recorded, a
new task with the whole history), as is one with an update unseen; a continue-as-new with only
signals unseen goes ahead and passes them to the next run (``runs.continue_as_new``)."""

from __future__ import annotations

import logging
from typing import Any

from kadence.schemas.records import RespondWorkflowTaskCompleted, WorkflowState

from .effects import Transition, schedule_workflow_task

__all__ = ["closing_outruns_signals"]

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
