"""Eager workflow start as a protocol between whatever sends a start (the SDK client, the
gateway) and whatever can run the run's first workflow task in the same process (an SDK
``Worker``): issue 45, decision 0052.

The sender picks a ``EagerStarter`` that serves the start's task queue and workflow type, asks it
for the first task (``eager_body``), sends the start with the command event ID the run's ID was
derived from, and tells the starter what the engine answered (``settle``): a start the engine
did not take with that task (a duplicate, the ID in use, a refusal) leaves the worker an instance
that ran ahead on a history that did not happen, which it drops."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from kadence.schemas.records import EagerWorkflowTask, StartWorkflow

from .records import start_run_id

__all__ = ["EagerStarter", "eager_body", "settle"]


@runtime_checkable
class EagerStarter(Protocol):
    """Runs the first workflow task of a run this process starts (``kadence.sdk.Worker``)."""

    def serves(self, namespace: str, task_queue: str, workflow_type: str) -> bool:
        """Whether it runs ``workflow_type``'s tasks on ``task_queue`` of ``namespace`` now."""
        ...

    async def run_first_task(
        self, workflow_id: str, run_id: str, body: StartWorkflow, request_id: str
    ) -> EagerWorkflowTask | None:
        """The first task of the run ``run_id`` that ``body`` starts, or None (not run)."""
        ...

    def forget_eager(self, workflow_id: str, run_id: str) -> None:
        """The engine did not take the first task it ran for ``run_id``."""
        ...


async def eager_body(
    starters: Iterable[EagerStarter],
    namespace: str,
    workflow_id: str,
    body: StartWorkflow,
    request_id: str,
    event_id: str,
) -> tuple[StartWorkflow, EagerStarter | None]:
    """``body`` (a start in ``namespace``) with the run's first task (``eager_workflow_task``) run
    by the first of ``starters`` that serves it, and that starter; or ``body`` unchanged and None. The start must
    then be sent with ``event_id`` (the run's ID is ``start_run_id(event_id)``). A start that
    names concurrency limits, or is debounced, is never eager: its first task waits."""
    if body.get("concurrency") or body.get("debounce_ms"):
        return body, None
    starter = next((s for s in starters if s.serves(namespace, body["task_queue"], body["workflow_type"])), None)
    if starter is None:
        return body, None
    task = await starter.run_first_task(workflow_id, start_run_id(event_id), body, request_id)
    if task is None:
        return body, None
    return {**body, "eager_workflow_task": task}, starter


def settle(starter: EagerStarter | None, workflow_id: str, event_id: str, reply: Mapping[str, Any]) -> None:
    """Tell ``starter`` (from ``eager_body``) whether the engine took its task: the start was
    recorded (status ok) as the run the task was run for."""
    if starter is None:
        return
    run_id = start_run_id(event_id)
    if reply.get("status") != "ok" or reply.get("run_id") != run_id:
        starter.forget_eager(workflow_id, run_id)
