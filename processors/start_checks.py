"""The checks of a start (``StartWorkflow``) before the history processor records anything: is it
valid at all (``invalid_start``: its IDs, names, limits, priority, debounce, cron, and what a
standalone activity's key requires), and may it start a new run of its workflow ID
(``start_rejection``: the open run, the reuse policy)."""

from __future__ import annotations

from kadence.schemas.records import StartWorkflow, WorkflowState
from kadence.topics.concurrency import limits_problem
from kadence.topics.cron import check_cron
from kadence.topics.debounce import debounce_problem
from kadence.topics.errors import InvalidArgumentError
from kadence.topics.identifiers import MAX_ID_LENGTH, MAX_NAME_LENGTH, problem, task_queue_problem
from kadence.topics.priority import priority_problem
from kadence.topics.standalone import standalone_problem

__all__ = ["invalid_start", "start_rejection"]


def invalid_start(wf: str, body: StartWorkflow) -> str | None:
    """Why a start's workflow ID, type or task queue is not valid (``topics.identifiers``)."""
    why = problem(wf, max_length=MAX_ID_LENGTH, slash=True)
    if why:
        return f"invalid workflow_id: {why}"
    why = problem(body["workflow_type"], max_length=MAX_NAME_LENGTH, slash=False)
    if why:
        return f"invalid workflow_type: {why}"
    why = task_queue_problem(body["task_queue"])
    if why:
        return f"invalid task_queue: {why}"
    why = limits_problem(body.get("concurrency") or [])
    if why:
        return f"invalid concurrency: {why}"
    why = priority_problem(body.get("priority"))
    if why:
        return f"invalid {why}"
    why = standalone_problem(wf, body)
    if why:
        return f"invalid start: {why}"
    why = debounce_problem(body.get("debounce_ms", 0), body.get("debounce_max_ms", 0), body.get("cron_schedule"))
    if why:
        return f"invalid {why}"
    if body.get("cron_schedule") is not None:
        try:
            check_cron(body["cron_schedule"])
        except InvalidArgumentError as exc:
            return f"invalid {exc}"
    return None


def start_rejection(st: WorkflowState, policy: str) -> str | None:
    if st["status"] == "running":
        return "workflow is already running"
    if policy == "reject_duplicate":
        return "a run with this workflow ID exists and the policy is reject_duplicate"
    if policy == "allow_duplicate_failed_only" and st["status"] in ("completed", "continued_as_new"):
        return "the previous run completed and the policy is allow_duplicate_failed_only"
    return None
