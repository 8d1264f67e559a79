"""Routes for schedules (``kadence.operations.schedules``; docs/guide.md "Schedules"): create,
describe, list, update, pause, unpause, trigger, backfill and delete. A schedule is the workflow
``kadence-schedule:{id}``: creating it is a start, each change is one of its updates (checked by
its validator: a rejected change writes nothing), describe is its query. The Idempotency-Key is
the start's or the update's request ID: a retry is answered as the first time."""

from __future__ import annotations

import dataclasses
import logging
import uuid
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from kadence.readmodels.visibility import VisibilityFilter
from kadence.topics.errors import InvalidArgumentError
from kadence.topics.protocol import check_found, query_body, update_body
from kadence.topics.schedules import (
    OVERLAP_POLICIES,
    SCHEDULE_ID_PREFIX,
    SCHEDULE_WORKFLOW_TYPE,
    SCHEDULES_TASK_QUEUE,
    ScheduleBackfill,
    ScheduleRequest,
    ScheduleState,
    schedule_workflow_id,
)

from ..context import Gateway, principal
from ..errors import ApiError, ErrorResponse, error_response
from .params import IDEMPOTENCY_KEY, READ, WRITE, Responses, WorkflowIdPath

__all__ = ["router"]

audit = logging.getLogger("kadence.audit")

router = APIRouter(prefix="/v1")

_OVERLAP_PATTERN = "^(" + "|".join(OVERLAP_POLICIES) + ")$"


class ScheduleCreated(BaseModel):
    schedule_id: str
    run_id: str = Field(description="the run of the schedule's workflow")


class ScheduleNote(BaseModel):
    note: str = Field("", max_length=1000, description="why (shown by describe)")


class ScheduleTrigger(BaseModel):
    overlap: str | None = Field(None, pattern=_OVERLAP_PATTERN, description="instead of the schedule's policy")


def _workflow_id(schedule_id: str) -> str:
    try:
        return schedule_workflow_id(schedule_id)
    except InvalidArgumentError as exc:
        raise ApiError(400, "invalid_input", str(exc), field="schedule_id") from exc


def _checked(body: Any) -> Any:
    try:
        return body.check()
    except InvalidArgumentError as exc:
        raise ApiError(400, "invalid_input", str(exc), field=exc.field) from exc


@router.post(
    "/schedules/{schedule_id}",
    status_code=201,
    response_model=ScheduleCreated,
    name="create_schedule",
    responses={**WRITE, 409: {"model": ErrorResponse}},
    summary="Create a schedule: at each time of its spec, start its action (run by `kadence schedules worker`)",
)
async def create_schedule(
    request: Request,
    gw: Gateway,
    schedule_id: WorkflowIdPath,
    body: ScheduleRequest,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> Any:
    who = principal(request)
    wf = _workflow_id(schedule_id)
    state = ScheduleState.new(_checked(body))
    audit.warning(
        "schedule %s created in namespace %s through the gateway by key %s",
        schedule_id,
        who.namespace,
        who.key_id or "(no auth)",
    )
    payload: dict[str, Any] = {
        "workflow_type": SCHEDULE_WORKFLOW_TYPE,
        "task_queue": SCHEDULES_TASK_QUEUE,
        "input": gw.converter.to_bytes([dataclasses.asdict(state)]),
        "id_reuse_policy": "allow_duplicate",
        "run_timeout_ms": None,
        "search_attributes": {},
    }
    reply, headers = await gw.command(request, who, wf, "StartWorkflow", payload, idempotency_key)
    if reply["status"] == "already_started":
        return error_response(409, "already_exists", f"schedule {schedule_id!r} exists", headers=headers)
    return JSONResponse(
        ScheduleCreated(schedule_id=schedule_id, run_id=reply["run_id"]).model_dump(), status_code=201, headers=headers
    )


@router.get(
    "/schedules/{schedule_id}",
    response_model=None,
    responses={**READ, 404: {"model": ErrorResponse}},
    name="describe_schedule",
    summary="A schedule: its spec, action, policy, state, counts, running and recent runs, next times",
)
async def describe_schedule(request: Request, gw: Gateway, schedule_id: WorkflowIdPath) -> Any:
    who = principal(request)
    wf = _workflow_id(schedule_id)
    engine = await gw.pool.get(who.namespace)
    reply = await engine.request(
        wf,
        "QueryWorkflow",
        query_body("describe", gw.converter.to_bytes([])),
        request_id=str(uuid.uuid4()),
        timeout=gw.config.reply_timeout,
    )
    if reply["status"] == "not_found":
        raise ApiError(404, "not_found", f"schedule {schedule_id!r} not found")
    if reply["status"] != "ok":
        return error_response(409, "query_rejected", reply["message"])
    described = gw.converter.from_bytes(reply["result"])
    if described.get("deleted"):
        raise ApiError(404, "not_found", f"schedule {schedule_id!r} was deleted")
    return described


async def _change(request: Request, gw: Gateway, schedule_id: str, name: str, args: list[Any], key: str | None) -> Any:
    who = principal(request)
    wf = _workflow_id(schedule_id)
    await gw.claim_key(request, who, key)
    engine = await gw.pool.get(who.namespace)
    reply = await engine.request(
        wf,
        "UpdateWorkflow",
        update_body(name, gw.converter.to_bytes(args), identity="gateway"),
        request_id=key or str(uuid.uuid4()),
        timeout=gw.config.reply_timeout,
    )
    if reply["status"] == "not_found":
        raise ApiError(404, "not_found", f"schedule {schedule_id!r} not found")
    check_found(reply, wf)
    if reply["status"] == "ok":
        audit.warning(
            "schedule %s: %s in namespace %s through the gateway by key %s",
            schedule_id,
            name,
            who.namespace,
            who.key_id or "(no auth)",
        )
        return {"schedule_id": schedule_id, "result": gw.converter.from_bytes(reply["result"])}
    failure = reply["failure"]
    message = f"{failure['type']}: {failure['message']}" if failure else reply["message"]
    if "closed" in message or "completed" in message:
        raise ApiError(404, "not_found", f"schedule {schedule_id!r} was deleted")
    return error_response(409, "update_rejected" if reply["status"] == "rejected" else "update_failed", message)


_CHANGE: Responses = {**WRITE, 404: {"model": ErrorResponse}, 409: {"model": ErrorResponse}}


@router.put(
    "/schedules/{schedule_id}",
    response_model=None,
    responses=_CHANGE,
    name="update_schedule",
    summary="Replace a schedule's spec, action, policy, paused state and note (the times taken stay taken)",
)
async def update_schedule(
    request: Request,
    gw: Gateway,
    schedule_id: WorkflowIdPath,
    body: ScheduleRequest,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> Any:
    request_body = _checked(body)
    return await _change(request, gw, schedule_id, "update", [dataclasses.asdict(request_body)], idempotency_key)


@router.post(
    "/schedules/{schedule_id}/pause",
    responses=_CHANGE,
    name="pause_schedule",
    summary="Pause a schedule",
    response_model=None,
)
async def pause_schedule(
    request: Request,
    gw: Gateway,
    schedule_id: WorkflowIdPath,
    body: ScheduleNote | None = None,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> Any:
    return await _change(request, gw, schedule_id, "pause", [(body or ScheduleNote()).note], idempotency_key)


@router.post(
    "/schedules/{schedule_id}/unpause",
    response_model=None,
    responses=_CHANGE,
    name="unpause_schedule",
    summary="Unpause a schedule (the paused times do not run)",
)
async def unpause_schedule(
    request: Request,
    gw: Gateway,
    schedule_id: WorkflowIdPath,
    body: ScheduleNote | None = None,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> Any:
    return await _change(request, gw, schedule_id, "unpause", [(body or ScheduleNote()).note], idempotency_key)


@router.post(
    "/schedules/{schedule_id}/trigger",
    response_model=None,
    responses=_CHANGE,
    name="trigger_schedule",
    summary="Take a schedule's action now; the result is its nominal time (epoch ms)",
)
async def trigger_schedule(
    request: Request,
    gw: Gateway,
    schedule_id: WorkflowIdPath,
    body: ScheduleTrigger | None = None,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> Any:
    return await _change(request, gw, schedule_id, "trigger", [(body or ScheduleTrigger()).overlap], idempotency_key)


@router.post(
    "/schedules/{schedule_id}/backfill",
    response_model=None,
    responses=_CHANGE,
    name="backfill_schedule",
    summary="Take the actions of the spec's times from start_ms to end_ms now; the result is how many",
)
async def backfill_schedule(
    request: Request,
    gw: Gateway,
    schedule_id: WorkflowIdPath,
    body: ScheduleBackfill,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> Any:
    backfill = _checked(body)
    return await _change(request, gw, schedule_id, "backfill", [dataclasses.asdict(backfill)], idempotency_key)


@router.delete(
    "/schedules/{schedule_id}",
    response_model=None,
    responses=_CHANGE,
    name="delete_schedule",
    summary="Delete a schedule (the runs it started go on)",
)
async def delete_schedule(
    request: Request,
    gw: Gateway,
    schedule_id: WorkflowIdPath,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> Any:
    return await _change(request, gw, schedule_id, "delete", [], idempotency_key)


@router.get(
    "/schedules",
    response_model=None,
    responses=READ,
    name="list_schedules",
    summary="The schedules (from the visibility projection)",
)
async def list_schedules(
    request: Request,
    gw: Gateway,
    page_size: int = Query(100, ge=1, le=1000),
    cursor: str | None = Query(None, max_length=2048, description="next_cursor of the previous page"),
) -> Any:
    reader = gw.visibility(principal(request).namespace)
    where = VisibilityFilter(workflow_type=SCHEDULE_WORKFLOW_TYPE, status="running")
    items, next_cursor = await reader.list(where, page_size=page_size, cursor=cursor)
    return {
        "schedules": [
            {"schedule_id": i["workflow_id"][len(SCHEDULE_ID_PREFIX) :], "start_time_ms": i.get("start_time_ms")}
            for i in items
        ],
        "next_cursor": next_cursor,
    }
