"""Schedules in the SDK: ``Client.create_schedule`` and the ``ScheduleHandle`` that describes,
pauses, triggers, backfills, updates and deletes one. A schedule is the workflow
``kadence-schedule:{id}`` (``kadence.operations.schedules`` runs it, on a ``kadence schedules
worker``); each change is one of its updates, checked before anything is written, and a retry
with the same ``request_id`` is answered as the first time."""

from __future__ import annotations

from datetime import datetime
from types import EllipsisType
from typing import TYPE_CHECKING, Any

from kadence.topics.errors import (
    ScheduleAlreadyRunningError,
    ScheduleNotFoundError,
    WorkflowAlreadyStartedError,
    WorkflowNotFoundError,
    WorkflowUpdateFailedError,
)
from kadence.topics.schedules import (
    SCHEDULE_WORKFLOW_TYPE,
    SCHEDULES_TASK_QUEUE,
    ScheduleAction,
    ScheduleBackfill,
    ScheduleDescription,
    SchedulePolicy,
    ScheduleRequest,
    ScheduleSpec,
    ScheduleState,
    schedule_workflow_id,
)

from ._definitions import workflow_type_name

if TYPE_CHECKING:
    from ._client import Client
    from ._handle import WorkflowHandle

__all__ = ["ScheduleHandle", "create_schedule", "schedule_action"]


def schedule_action(
    workflow: Any, *args: Any, task_queue: str, id: str | None = None, run_timeout_ms: int | None = None
) -> ScheduleAction:
    """The action of a schedule: start ``workflow`` (its class, or its type's name) with ``args``
    on ``task_queue``; its runs' IDs are ``{id}-{time}`` (``id`` defaults to the schedule's)."""
    return ScheduleAction(
        workflow_type=workflow_type_name(workflow),
        task_queue=task_queue,
        args=list(args),
        workflow_id=id,
        run_timeout_ms=run_timeout_ms,
    ).check()


def _ms(value: datetime | int) -> int:
    return value if isinstance(value, int) else int(value.timestamp() * 1000)


class ScheduleHandle:
    """A schedule by its ID (``client.get_schedule_handle(id)``)."""

    def __init__(self, client: Client, schedule_id: str) -> None:
        self.id = schedule_id
        self._workflow: WorkflowHandle = client.get_workflow_handle(schedule_workflow_id(schedule_id))

    def __repr__(self) -> str:
        return f"ScheduleHandle({self.id!r})"

    async def _update(self, name: str, *args: Any, request_id: str | None, result_type: Any = None) -> Any:
        try:
            return await self._workflow.execute_update(name, *args, request_id=request_id, result_type=result_type)
        except WorkflowNotFoundError as exc:
            raise ScheduleNotFoundError(f"schedule {self.id!r} not found (or deleted)", schedule_id=self.id) from exc
        except WorkflowUpdateFailedError as exc:
            if "closed" in str(exc) or "completed" in str(exc):
                raise ScheduleNotFoundError(f"schedule {self.id!r} was deleted", schedule_id=self.id) from exc
            raise

    async def describe(self) -> ScheduleDescription:
        """Its spec, action, policy, paused state and note, counts (actions, missed, skipped), the
        runs running and the last ones, and the next five times."""
        try:
            result: ScheduleDescription = await self._workflow.query("describe", result_type=ScheduleDescription)
        except WorkflowNotFoundError as exc:
            raise ScheduleNotFoundError(f"schedule {self.id!r} not found", schedule_id=self.id) from exc
        if result.deleted:
            raise ScheduleNotFoundError(f"schedule {self.id!r} was deleted", schedule_id=self.id)
        return result

    async def pause(self, note: str = "", *, request_id: str | None = None) -> None:
        """Stop taking actions (times that pass while paused do not fire later)."""
        await self._update("pause", note, request_id=request_id)

    async def unpause(self, note: str = "", *, request_id: str | None = None) -> None:
        await self._update("unpause", note, request_id=request_id)

    async def trigger(self, *, overlap: str | None = None, request_id: str | None = None) -> int:
        """Take an action now, by ``overlap`` (default: the schedule's policy); its nominal time (ms)."""
        if overlap is not None:
            SchedulePolicy(overlap=overlap).check()
        result: int = await self._update("trigger", overlap, request_id=request_id, result_type=int)
        return result

    async def backfill(
        self,
        start: datetime | int,
        end: datetime | int,
        *,
        overlap: str | None = None,
        request_id: str | None = None,
    ) -> int:
        """Take every time of the spec from ``start`` to ``end`` (inclusive; datetimes or epoch ms)
        now, by ``overlap`` (default: the schedule's policy); how many times there were."""
        backfill = ScheduleBackfill(start_ms=_ms(start), end_ms=_ms(end), overlap=overlap).check()
        result: int = await self._update("backfill", backfill, request_id=request_id, result_type=int)
        return result

    async def update(
        self,
        *,
        spec: ScheduleSpec | None = None,
        action: ScheduleAction | None = None,
        policy: SchedulePolicy | None = None,
        paused: bool | None = None,
        note: str | None = None,
        request_id: str | None = None,
        remaining_actions: int | EllipsisType | None = ...,
    ) -> None:
        """Replace what is given (the rest stays); the times already taken stay taken.
        ``remaining_actions``: a new limit of runs to start (None: no limit; left out: as it is)."""
        current = (await self.describe()).state
        request = ScheduleRequest(
            spec=spec or current.request.spec,
            action=action or current.request.action,
            policy=policy or current.request.policy,
            paused=current.paused if paused is None else paused,
            note=current.note if note is None else note,
            remaining_actions=current.request.remaining_actions
            if isinstance(remaining_actions, EllipsisType)
            else remaining_actions,
        ).check()
        await self._update("update", request, request_id=request_id)

    async def delete(self, *, request_id: str | None = None) -> None:
        """End the schedule; the runs it started go on."""
        await self._update("delete", request_id=request_id)


async def create_schedule(
    client: Client,
    schedule_id: str,
    *,
    spec: ScheduleSpec,
    action: ScheduleAction,
    policy: SchedulePolicy | None = None,
    paused: bool = False,
    note: str = "",
    request_id: str | None = None,
    remaining_actions: int | None = None,
) -> ScheduleHandle:
    state = ScheduleState.new(
        ScheduleRequest(
            spec=spec,
            action=action,
            policy=policy or SchedulePolicy(),
            paused=paused,
            note=note,
            remaining_actions=remaining_actions,
        )
    )
    try:
        await client.start_workflow(
            SCHEDULE_WORKFLOW_TYPE,
            state,
            id=schedule_workflow_id(schedule_id),
            task_queue=SCHEDULES_TASK_QUEUE,
            request_id=request_id,
        )
    except WorkflowAlreadyStartedError as exc:
        raise ScheduleAlreadyRunningError(f"schedule {schedule_id!r} exists", schedule_id=schedule_id) from exc
    return ScheduleHandle(client, schedule_id)
