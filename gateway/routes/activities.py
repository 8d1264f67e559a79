"""Routes that complete an activity from outside its worker (async activity completion): a
service that is not Python completes, fails or heartbeats an attempt whose function called
``activity.raise_complete_async()``, by its task token or by workflow and activity ID."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from kadence.topics.async_completion import AsyncActivityHandle
from kadence.topics.errors import ActivityNotCurrentError, ApplicationError, InvalidIdentifierError

from ..context import Gateway, principal
from ..errors import ApiError
from ..models import NameParam, WorkflowIdParam
from .params import WRITE

__all__ = ["router"]

router = APIRouter(prefix="/v1")

NOT_CURRENT: dict[int | str, dict[str, Any]] = {
    409: {"description": "`activity_not_current`: the attempt had ended; nothing was recorded"}
}


class ActivityTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task_token: str | None = Field(None, max_length=4096, description="`activity.info().task_token`, as text")
    workflow_id: WorkflowIdParam | None = Field(None, description="with activity_id, instead of task_token")
    run_id: str | None = Field(None, max_length=64, description="the run (default: the current one)")
    activity_id: str | None = Field(None, max_length=256, description="with workflow_id, instead of task_token")


class ActivityCompletion(ActivityTarget):
    result: Any = Field(None, description="the activity's result")


class ActivityFailure(ActivityTarget):
    message: str = Field(..., max_length=10_000, description="the error's message")
    type: NameParam = Field("ActivityFailure", description="the error's type (for retry policies)")
    non_retryable: bool = Field(False, description="true: the activity is not retried")


class ActivityHeartbeat(ActivityTarget):
    details: Any = Field(None, description="progress, read by the next attempt as heartbeat_details")


class ActivityOutcome(BaseModel):
    status: str = Field(..., description="completed | failed | recorded")


async def _handle(request: Request, gw: Gateway, body: ActivityTarget) -> AsyncActivityHandle:
    engine = await gw.pool.get(principal(request).namespace)
    try:
        return AsyncActivityHandle(
            engine,
            gw.converter,
            f"gateway:{principal(request).key_id or 'anonymous'}",
            task_token=body.task_token,
            workflow_id=body.workflow_id,
            run_id=body.run_id,
            activity_id=body.activity_id,
        )
    except InvalidIdentifierError as exc:
        raise ApiError(400, "invalid_input", str(exc), field="task_token") from exc


async def _done(call: Any) -> None:
    try:
        await call
    except ActivityNotCurrentError as exc:
        raise ApiError(409, "activity_not_current", str(exc)) from exc


@router.post(
    "/activities/complete",
    response_model=ActivityOutcome,
    name="complete_activity",
    responses={**WRITE, **NOT_CURRENT},
    summary="Complete an activity attempt that its worker left open (async completion)",
)
async def complete_activity(request: Request, gw: Gateway, body: ActivityCompletion) -> ActivityOutcome:
    handle = await _handle(request, gw, body)
    await _done(handle.complete(body.result))
    return ActivityOutcome(status="completed")


@router.post(
    "/activities/fail",
    response_model=ActivityOutcome,
    name="fail_activity",
    responses={**WRITE, **NOT_CURRENT},
    summary="Fail an activity attempt that its worker left open (retried by its retry policy)",
)
async def fail_activity(request: Request, gw: Gateway, body: ActivityFailure) -> ActivityOutcome:
    handle = await _handle(request, gw, body)
    await _done(handle.fail(ApplicationError(body.message, type=body.type, non_retryable=body.non_retryable)))
    return ActivityOutcome(status="failed")


@router.post(
    "/activities/heartbeat",
    response_model=ActivityOutcome,
    name="heartbeat_activity",
    responses={**WRITE, **NOT_CURRENT},
    summary="Record a heartbeat of an activity attempt that its worker left open",
)
async def heartbeat_activity(request: Request, gw: Gateway, body: ActivityHeartbeat) -> ActivityOutcome:
    handle = await _handle(request, gw, body)
    await _done(handle.heartbeat(body.details))
    return ActivityOutcome(status="recorded")
