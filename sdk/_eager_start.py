"""Eager workflow start (issue 45; Temporal's ``request_eager_start``): the first workflow task of
a new run is run by a worker in the process of the client that starts it, before the start is
sent. The start carries the task's commands (``StartWorkflow.eager_workflow_task``) and the
engine records the start, the task and what its commands cause in one transaction
(``processors.state_machine._start``), so a workflow of local activities costs one transaction
from start to result, and the first activity of any workflow is dispatched with its start.

The run's ID is known before the engine records it: it is derived from the start command's event
ID (``topics.records.start_run_id``), which the client chooses. When the engine does not take the
task (the ID is in use, a duplicate start, a pinned build), the run gets an ordinary first task
and the worker's instance, which ran ahead on a history that did not happen, is dropped (as after
a refused eager task of decision 0031)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, cast

from kadence.schemas.records import EagerWorkflowTask, StartWorkflow
from kadence.topics.records import now_ms

from ._instance import WorkflowInfo, WorkflowInstance
from ._local_activities import run_local_activities, worker_local_activity

if TYPE_CHECKING:
    from ._worker import Worker

__all__ = ["run_first_task"]

log = logging.getLogger("kadence._worker")


def _first_events(body: StartWorkflow, token: str, at_ms: int) -> list[dict[str, Any]]:
    """The history the engine records before the first workflow task: its start, then the
    task's scheduling at the workflow time the code runs with."""
    started = {
        "workflow_type": body["workflow_type"],
        "task_queue": body["task_queue"],
        "input": body["input"],
        "attempt": 1,
        "memo": dict(body.get("memo") or {}),
        "headers": dict(body.get("headers") or {}),
        "search_attributes": dict(body.get("search_attributes") or {}),
        "cron_schedule": None,
    }
    return [
        {"seq": 1, "timestamp_ms": at_ms, "request_id": token, "attributes": ("WorkflowExecutionStarted", started)},
        {
            "seq": 2,
            "timestamp_ms": at_ms,
            "request_id": None,
            "attributes": ("WorkflowTaskScheduled", {"task_queue": body["task_queue"], "attempt": 1}),
        },
    ]


async def run_first_task(
    worker: Worker, workflow_id: str, run_id: str, body: StartWorkflow, token: str
) -> EagerWorkflowTask | None:
    """Run the first workflow task of the run ``run_id`` that ``body`` starts (its local
    activities included) on ``worker``; the task to send with the start, or None when this worker
    cannot run it (not serving, pinned to a build, the type not registered, a cron start) or the
    code failed (the ordinary first task then meets the failure and reports it)."""
    defn = worker._workflows.get(body["workflow_type"])
    if defn is None or not worker.started or worker.build_id is not None or body.get("cron_schedule"):
        return None
    at = now_ms()
    inst = WorkflowInstance(
        defn,
        WorkflowInfo(workflow_id, run_id, body["workflow_type"], body["task_queue"], 1),
        worker.client.converter,
        worker.interceptors,
        worker._failure_types,
    )
    try:
        commands = inst.apply(_first_events(body, token, at), 2)
        if inst.pending_local_activities():
            task = {"workflow_id": workflow_id, "run_id": run_id, "workflow_type": body["workflow_type"]}
            await run_local_activities(inst, lambda call: worker_local_activity(worker, task, call, inst.info.headers))  # type: ignore[arg-type]
            commands = inst.commands()
    except asyncio.CancelledError:
        inst.discard()
        raise
    except Exception as exc:  # noqa: BLE001 - the ordinary first task meets it, and reports it
        log.debug("workflow %s run %s: eager first task not run: %s", workflow_id, run_id, exc)
        inst.discard()
        return None
    inst.eager_token = token  # kept only if the engine records the task (WorkflowTasks.on_task)
    worker._keep(workflow_id, inst)
    worker.stats["eager_starts"] += 1
    return cast(
        EagerWorkflowTask,
        {
            "base_scheduled_seq": 0,
            "base_request_id": None,
            "workflow_time_ms": at,
            "commands": commands,
            "build_id": None,
        },
    )
