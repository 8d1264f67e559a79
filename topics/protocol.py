"""The engine's protocol as its callers see it, in one place for every sender (issue 20 item 2):
the bodies of the commands that start and signal workflows, for the SDK client, the gateway and
the bridges (before, the start body was written out four times, each with a different subset of
the fields), and what a reply to a command stands for (``refusal``, ``expect_ok``,
``check_found``), for the SDK client and the gateway. Each builder checks what it is given, so
every entry point refuses the same bad input with the same typed error before anything is sent;
each refusal is the same error of the tree wherever it is read (the gateway renders it as HTTP)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from kadence.schemas.records import (
    AwaitWorkflowResult,
    ConcurrencyLimit,
    Priority,
    QueryWorkflow,
    RequestCancelWorkflow,
    SignalWorkflow,
    StartWorkflow,
    TerminateWorkflow,
    UpdateWorkflow,
)

from .concurrency import check_limits, check_records_writable
from .cron import check_cron
from .debounce import check_debounce
from .errors import (
    CommandRejectedError,
    KadenceError,
    WorkflowAlreadyStartedError,
    WorkflowError,
    WorkflowNotFoundError,
)
from .identifiers import check_name, check_task_queue
from .priority import check_priority
from .search_attributes import check_search_attributes
from .standalone import check_kind_unset

__all__ = [
    "ID_REUSE_POLICIES",
    "cancel_body",
    "check_found",
    "expect_ok",
    "operator_body",
    "query_body",
    "refusal",
    "result_body",
    "signal_body",
    "start_body",
    "update_body",
]

_Reply = TypeVar("_Reply", bound=Mapping[str, Any])

#: what a start does when a run of the workflow ID exists (Temporal's reuse policies)
ID_REUSE_POLICIES = ("allow_duplicate", "allow_duplicate_failed_only", "reject_duplicate", "terminate_if_running")


def start_body(
    workflow_type: str,
    task_queue: str,
    input: bytes,
    *,
    id_reuse_policy: str = "allow_duplicate",
    run_timeout_ms: int | None = None,
    execution_timeout_ms: int | None = None,
    search_attributes: Mapping[str, object] | None = None,
    memo: dict[str, bytes] | None = None,
    headers: dict[str, str] | None = None,
    cron_schedule: str | None = None,
    concurrency: Sequence[ConcurrencyLimit] = (),
    debounce_ms: int = 0,
    debounce_max_ms: int = 0,
    priority: Priority | None = None,
) -> StartWorkflow:
    """A ``StartWorkflow`` body (also the ``start`` of a signal- or update-with-start).
    ``input``: the arguments as the converter encoded them. ``KadenceError`` (or its
    ``InvalidIdentifierError``) for a bad type name, task queue or reuse policy;
    ``InvalidArgumentError`` for a bad debounce (``topics.debounce``) or priority
    (``topics.priority``)."""
    if id_reuse_policy not in ID_REUSE_POLICIES:
        raise KadenceError(f"id_reuse_policy must be one of {', '.join(ID_REUSE_POLICIES)}, not {id_reuse_policy!r}")
    check_debounce(debounce_ms, debounce_max_ms, cron_schedule)
    check_kind_unset(search_attributes)
    return {
        "workflow_type": check_name(workflow_type, field="workflow type"),
        "task_queue": check_task_queue(task_queue),
        "input": input,
        "id_reuse_policy": id_reuse_policy,
        "run_timeout_ms": run_timeout_ms,
        "search_attributes": check_search_attributes(search_attributes),
        "execution_timeout_ms": execution_timeout_ms,
        "memo": dict(memo or {}),
        "headers": dict(headers or {}),
        "cron_schedule": None if cron_schedule is None else check_cron(cron_schedule),
        "concurrency": _writable_limits(concurrency),
        "debounce_ms": debounce_ms,
        "debounce_max_ms": debounce_max_ms,
        "priority": check_priority(priority),
    }


def _writable_limits(limits: Sequence[ConcurrencyLimit]) -> list[ConcurrencyLimit]:
    records = check_limits(limits)
    check_records_writable(records)
    return records


def signal_body(signal_name: str, input: bytes, *, identity: str, start: StartWorkflow | None = None) -> SignalWorkflow:
    """A ``SignalWorkflow`` body; ``start`` (a ``start_body``) makes it a signal-with-start."""
    return {
        "signal_name": check_name(signal_name, field="signal"),
        "input": input,
        "start": start,
        "identity": identity,
    }


def cancel_body(reason: str = "") -> RequestCancelWorkflow:
    """A ``RequestCancelWorkflow`` body."""
    return {"reason": reason}


def operator_body(reason: str, identity: str) -> TerminateWorkflow:
    """The body of an operator's ``TerminateWorkflow``, ``PauseWorkflow`` or ``UnpauseWorkflow``
    (one shape: why, and who; the audit log and the history record both)."""
    return {"reason": reason, "identity": identity}


def query_body(query_name: str | None, input: bytes) -> QueryWorkflow:
    """A ``QueryWorkflow`` body; ``InvalidIdentifierError`` for a name that is not one (an
    interceptor may have renamed the call: it is checked here, where it is sent)."""
    return {"query_name": check_name(query_name, field="query"), "input": input}


def update_body(update_name: str, input: bytes, *, identity: str, start: StartWorkflow | None = None) -> UpdateWorkflow:
    """An ``UpdateWorkflow`` body; ``start`` (a ``start_body``) makes it an update-with-start."""
    return {
        "update_name": check_name(update_name, field="update"),
        "input": input,
        "start": start,
        "identity": identity,
    }


def result_body(*, wait: bool) -> AwaitWorkflowResult:
    """An ``AwaitWorkflowResult`` body: the run's outcome once it closes (``wait``), or its
    description now."""
    return {"wait": wait}


# -- replies ---------------------------------------------------------------------------------------


def check_found(reply: Mapping[str, Any], workflow_id: str, run_id: str | None = None) -> None:
    """``WorkflowNotFoundError`` when the reply says there is no such workflow (or ``run_id``)."""
    if reply["status"] == "not_found":
        raise _not_found(reply, workflow_id, run_id)


def _not_found(reply: Mapping[str, Any], workflow_id: str, run_id: str | None = None) -> WorkflowNotFoundError:
    said = reply["message"] or ""
    return WorkflowNotFoundError(
        said or f"workflow {workflow_id!r} not found", workflow_id=workflow_id, run_id=run_id, engine_message=said
    )


def refusal(
    reply: Mapping[str, Any], workflow_id: str, *, what: str, error: type[WorkflowError] = CommandRejectedError
) -> WorkflowError | None:
    """What a reply to a command stands for, read in one place for the SDK client and the
    gateway: None when the engine applied it (``ok``); else the error of the error tree:
    ``WorkflowNotFoundError`` (no such workflow or run), ``WorkflowAlreadyStartedError`` (a
    start met an open run, or its reuse policy refused), or ``error`` (the engine refused: the
    run is not running, the reset point is not valid, the query handler failed ...) with the
    message ``{what}: {the engine's message}``. ``engine_message`` keeps the engine's words."""
    status = reply["status"]
    if status == "ok":
        return None
    if status == "not_found":
        return _not_found(reply, workflow_id)
    said = reply["message"] or ""
    if status == "already_started":
        return WorkflowAlreadyStartedError(
            f"workflow {workflow_id!r} already started (run {reply['run_id']}): {said}",
            workflow_id=workflow_id,
            run_id=reply["run_id"],
            engine_message=said,
        )
    return error(
        f"{what}: {said or status}", workflow_id=workflow_id, run_id=reply["run_id"], engine_message=said or status
    )


def expect_ok(
    reply: _Reply, workflow_id: str, *, what: str, error: type[WorkflowError] = CommandRejectedError
) -> _Reply:
    """``reply`` when the engine applied the command; else raises what ``refusal`` gives."""
    refused = refusal(reply, workflow_id, what=what, error=error)
    if refused is not None:
        raise refused
    return reply
