"""The bodies of the commands that start and signal workflows, built in one place for every
sender: the SDK client, the gateway and the bridges (issue 20 item 2; before, the start body was
written out four times, each with a different subset of the fields). Each builder checks what it
is given, so every entry point refuses the same bad input with the same typed error before
anything is sent."""

from __future__ import annotations

from kadence.schemas.records import SignalWorkflow, StartWorkflow

from .errors import KadenceError
from .identifiers import check_name, check_task_queue

__all__ = ["ID_REUSE_POLICIES", "signal_body", "start_body"]

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
    search_attributes: dict[str, str] | None = None,
    memo: dict[str, bytes] | None = None,
    headers: dict[str, str] | None = None,
) -> StartWorkflow:
    """A ``StartWorkflow`` body (also the ``start`` of a signal- or update-with-start).
    ``input``: the arguments as the converter encoded them. ``KadenceError`` (or its
    ``InvalidIdentifierError``) for a bad type name, task queue or reuse policy."""
    if id_reuse_policy not in ID_REUSE_POLICIES:
        raise KadenceError(f"id_reuse_policy must be one of {', '.join(ID_REUSE_POLICIES)}, not {id_reuse_policy!r}")
    return {
        "workflow_type": check_name(workflow_type, field="workflow type"),
        "task_queue": check_task_queue(task_queue),
        "input": input,
        "id_reuse_policy": id_reuse_policy,
        "run_timeout_ms": run_timeout_ms,
        "search_attributes": dict(search_attributes or {}),
        "execution_timeout_ms": execution_timeout_ms,
        "memo": dict(memo or {}),
        "headers": dict(headers or {}),
    }


def signal_body(signal_name: str, input: bytes, *, identity: str, start: StartWorkflow | None = None) -> SignalWorkflow:
    """A ``SignalWorkflow`` body; ``start`` (a ``start_body``) makes it a signal-with-start."""
    return {
        "signal_name": check_name(signal_name, field="signal"),
        "input": input,
        "start": start,
        "identity": identity,
    }
