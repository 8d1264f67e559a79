"""Routes on standalone activities (decision 0063, ``kadence.topics.standalone``): start one by
its own ID with no workflow around it, describe it, wait for its result, cancel and terminate it.
The engine holds each as a run keyed ``kadence-activity:{id}``; these routes take and answer the
activity ID alone."""

from __future__ import annotations

import logging
import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from kadence.readmodels.visibility import VisibilityFilter
from kadence.schemas.records import ActivityOptions, RetryPolicy
from kadence.topics.describe import describe_to_json
from kadence.topics.errors import (
    BrokerUnavailableError,
    InvalidQueryError,
    WorkflowAlreadyStartedError,
    WorkflowNotFoundError,
)
from kadence.topics.protocol import cancel_body, operator_body, refusal, result_body
from kadence.topics.search_attributes import from_json, from_wire
from kadence.topics.standalone import (
    ACTIVITY_CONFLICT_POLICIES,
    ACTIVITY_KIND,
    ACTIVITY_REUSE_POLICIES,
    KIND_ATTRIBUTE,
    activity_key,
    activity_start_body,
    listed_activity,
    reuse_policy_of,
)

from ..context import Gateway, GatewayContext, principal
from ..errors import ApiError, error_response, refused_response
from ..models import NameParam, ReasonRequest, TaskQueueParam, WorkflowIdInPath
from .params import IDEMPOTENCY_KEY, KEYED_IDS, READ, WRITE, TypePath, ms

__all__ = ["router"]

log = logging.getLogger(__name__)
audit = logging.getLogger("kadence.audit")

router = APIRouter(prefix="/v1")

ActivityIdPath = Annotated[
    WorkflowIdInPath, Path(description="the standalone activity's ID; a / in it is sent encoded, as %2F")
]
#: the longest timeout the routes take (ten years), in seconds
_MAX_SECONDS = 10 * 365 * 86400


class RetryPolicyModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    initial_interval_seconds: float = Field(1.0, gt=0, le=86400)
    backoff_coefficient: float = Field(2.0, ge=1, le=100)
    maximum_interval_seconds: float | None = Field(None, gt=0, le=365 * 86400, description="default 100x the initial")
    maximum_attempts: int = Field(0, ge=0, le=1_000_000, description="0: unlimited")
    non_retryable_error_types: list[NameParam] = Field(default_factory=list, max_length=100)


class ActivityStartRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    activity_id: str | None = Field(
        None,
        min_length=1,
        max_length=900,
        description="defaults to an ID derived from the Idempotency-Key, or a random UUID without one",
    )
    task_queue: TaskQueueParam = Field(..., description="the queue whose workers have the activity")
    input: list[Any] = Field(default_factory=list, description="the activity's positional arguments")
    start_to_close_timeout_seconds: float | None = Field(None, gt=0, le=_MAX_SECONDS, description="bounds each attempt")
    schedule_to_close_timeout_seconds: float | None = Field(
        None, gt=0, le=_MAX_SECONDS, description="bounds all attempts"
    )
    schedule_to_start_timeout_seconds: float | None = Field(None, gt=0, le=_MAX_SECONDS)
    heartbeat_timeout_seconds: float | None = Field(None, gt=0, le=_MAX_SECONDS)
    retry_policy: RetryPolicyModel | None = None
    id_reuse_policy: Literal[ACTIVITY_REUSE_POLICIES] = Field(  # type: ignore[valid-type]
        "allow_duplicate", description="whether a closed activity's ID may start again"
    )
    id_conflict_policy: Literal[ACTIVITY_CONFLICT_POLICIES] = Field(  # type: ignore[valid-type]
        "fail", description="when the ID's activity is open: fail (409), use_existing, terminate_existing"
    )
    search_attributes: dict[str, Any] = Field(default_factory=dict, max_length=100)
    wait_seconds: float = Field(0, ge=0, le=60, description="wait up to this long for the result")


class ActivityRunResponse(BaseModel):
    activity_id: str
    run_id: str
    status: str | None = Field(None, description="with a wait: the status when the wait ended")
    result: Any = Field(None, description="with a wait: the result of a completed activity")
    failure: dict[str, Any] | None = Field(
        None, description="with a wait: type and message of one that did not complete"
    )


def _retry_record(policy: RetryPolicyModel | None) -> RetryPolicy | None:
    if policy is None:
        return None
    return {
        "initial_interval_ms": max(1, int(policy.initial_interval_seconds * 1000)),
        "backoff_coefficient": policy.backoff_coefficient,
        "maximum_interval_ms": ms(policy.maximum_interval_seconds),
        "maximum_attempts": policy.maximum_attempts,
        "non_retryable_error_types": list(policy.non_retryable_error_types),
    }


async def _outcome(gw: GatewayContext, engine: Any, key: str, run_id: str | None, seconds: float) -> dict[str, Any]:
    """``{status, result, failure}`` of the run (its current one without ``run_id``), waiting up to
    ``seconds`` for it to close (status running after that)."""
    try:
        reply = await engine.request(
            key, "AwaitWorkflowResult", result_body(wait=seconds > 0), run_id=run_id, request_id=str(uuid.uuid4()),
            timeout=seconds if seconds > 0 else gw.config.reply_timeout,
        )  # fmt: skip
    except BrokerUnavailableError:
        if seconds <= 0:
            raise
        return {"status": "running"}
    if reply["status"] == "not_found":
        raise WorkflowNotFoundError(f"standalone activity {key.split(':', 1)[1]!r} not found")
    out: dict[str, Any] = {"run_id": reply["run_id"], "status": reply["status"]}
    if reply["status"] == "completed":
        out["result"] = gw.converter.from_bytes(reply["result"])
    elif reply["failure"]:
        out["failure"] = {"type": reply["failure"]["type"], "message": reply["failure"]["message"]}
    return out


@router.post(
    "/activities/{activity_type}/start",
    status_code=201,
    response_model=ActivityRunResponse,
    name="start_activity",
    responses=WRITE,
    summary="Start a standalone activity (no workflow around it); one stable result per ID",
)
async def start_activity(
    request: Request,
    gw: Gateway,
    activity_type: TypePath,
    body: ActivityStartRequest,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> Any:
    who = principal(request)
    if body.activity_id:
        activity_id = body.activity_id
    elif idempotency_key:
        activity_id = str(uuid.uuid5(KEYED_IDS, f"{who.namespace}\nactivity\n{idempotency_key}"))
    else:
        activity_id = str(uuid.uuid4())
    key = activity_key(activity_id, field="activity_id")
    options: ActivityOptions = {
        "task_queue": body.task_queue,
        "schedule_to_close_timeout_ms": ms(body.schedule_to_close_timeout_seconds),
        "schedule_to_start_timeout_ms": ms(body.schedule_to_start_timeout_seconds),
        "start_to_close_timeout_ms": ms(body.start_to_close_timeout_seconds),
        "heartbeat_timeout_ms": ms(body.heartbeat_timeout_seconds),
        "retry_policy": _retry_record(body.retry_policy),
        "concurrency": [],
        "priority": None,
    }
    payload = activity_start_body(
        activity_type,
        await gw.encoded(request, body.input),
        options,
        id_reuse_policy=reuse_policy_of(body.id_reuse_policy, body.id_conflict_policy),
        search_attributes=from_wire(from_json(body.search_attributes)),
    )
    reply, headers = await gw.command(request, who, key, "StartWorkflow", payload, idempotency_key)
    refused = refusal(reply, key, what=f"start of standalone activity {activity_id!r} rejected")
    status_code = 201
    if isinstance(refused, WorkflowAlreadyStartedError) and body.id_conflict_policy == "use_existing":
        engine = await gw.pool.get(who.namespace)
        if (await _outcome(gw, engine, key, reply["run_id"], 0))["status"] == "running":
            refused, status_code = None, 200  # the open run's handle, nothing new started
    if isinstance(refused, WorkflowAlreadyStartedError):
        return error_response(409, "already_started", refused.engine_message, headers=headers, run_id=reply["run_id"])
    if refused is not None:
        return error_response(400, "invalid_input", refused.engine_message, headers=headers)
    log.info("started standalone activity %s run %s in namespace %s", activity_id, reply["run_id"], who.namespace)
    out: dict[str, Any] = {"activity_id": activity_id, "run_id": reply["run_id"]}
    if body.wait_seconds > 0:
        engine = await gw.pool.get(who.namespace)
        waited = await _outcome(gw, engine, key, reply["run_id"], min(body.wait_seconds, gw.config.max_wait_seconds))
        out.update(waited, run_id=reply["run_id"])
    return JSONResponse(out, status_code=status_code, headers=headers)


@router.get(
    "/activities/{activity_id}/result",
    response_model=ActivityRunResponse,
    name="activity_result",
    responses=READ,
    summary="A standalone activity's outcome; optionally waits for it to close",
)
async def activity_result(
    request: Request,
    gw: Gateway,
    activity_id: ActivityIdPath,
    run_id: str | None = Query(None, min_length=1, max_length=200),
    wait_seconds: float = Query(0, ge=0, le=60, description="wait up to this long for the activity to close"),
) -> Any:
    who = principal(request)
    key = activity_key(activity_id, field="activity_id")
    engine = await gw.pool.get(who.namespace)
    out = await _outcome(gw, engine, key, run_id, min(wait_seconds, gw.config.max_wait_seconds))
    return {"activity_id": activity_id, "run_id": out.pop("run_id", run_id or ""), **out}


@router.get("/activities/{activity_id}", responses=READ, summary="Describe a standalone activity", response_model=None)
async def describe_activity(request: Request, gw: Gateway, activity_id: ActivityIdPath) -> Any:
    who = principal(request)
    key = activity_key(activity_id, field="activity_id")
    engine = await gw.pool.get(who.namespace)
    reply = await engine.request(
        key, "AwaitWorkflowResult", result_body(wait=False), request_id=str(uuid.uuid4()),
        timeout=gw.config.reply_timeout,
    )  # fmt: skip
    if reply["status"] == "not_found":
        raise WorkflowNotFoundError(f"standalone activity {activity_id!r} not found")
    described = describe_to_json(key, reply, gw.converter)
    return {"activity_id": activity_id, **described}


async def _act(
    request: Request, gw: GatewayContext, activity_id: str, body_type: str, payload: Any, key: str | None
) -> JSONResponse:
    who = principal(request)
    wf = activity_key(activity_id, field="activity_id")
    audit.warning(
        "%s of standalone activity %s in namespace %s requested through the gateway by key %s",
        body_type.removesuffix("Workflow").lower(),
        activity_id,
        who.namespace,
        who.key_id or "(no auth)",
    )
    reply, headers = await gw.command(request, who, wf, body_type, payload, key)
    try:
        refused = refused_response(reply, wf, "not_running", headers=headers)
    except WorkflowNotFoundError:
        raise WorkflowNotFoundError(f"standalone activity {activity_id!r} not found") from None
    if refused is not None:
        return refused
    return JSONResponse({"activity_id": activity_id, "run_id": reply["run_id"]}, headers=headers)


@router.post(
    "/activities/{activity_id}/cancel",
    response_model=ActivityRunResponse,
    name="cancel_activity",
    responses=WRITE,
    summary="Cancel a standalone activity: it closes canceled now; its attempt learns it at its next heartbeat",
)
async def cancel_activity(
    request: Request,
    gw: Gateway,
    activity_id: ActivityIdPath,
    body: ReasonRequest | None = None,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> Any:
    payload = cancel_body(body.reason if body else "")
    return await _act(request, gw, activity_id, "RequestCancelWorkflow", payload, idempotency_key)


@router.post(
    "/activities/{activity_id}/terminate",
    response_model=ActivityRunResponse,
    name="terminate_activity",
    responses=WRITE,
    summary="Terminate a standalone activity at once",
)
async def terminate_activity(
    request: Request,
    gw: Gateway,
    activity_id: ActivityIdPath,
    body: ReasonRequest | None = None,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> Any:
    payload = operator_body(body.reason if body else "", "gateway")
    return await _act(request, gw, activity_id, "TerminateWorkflow", payload, idempotency_key)


class ActivityList(BaseModel):
    activities: list[dict[str, Any]]
    next_cursor: str | None = None
    counts: dict[str, Any] | None = None


@router.get(
    "/activities",
    response_model=ActivityList,
    name="list_activities",
    responses=READ,
    summary="List standalone activities (from the visibility projection), newest start first",
)
async def list_activities(
    request: Request,
    gw: Gateway,
    activity_type: str | None = Query(None, alias="type", min_length=1, max_length=200),
    status: str | None = Query(None, pattern="^(running|completed|failed|canceled|terminated|timed_out)$"),
    page_size: int = Query(100, ge=1, le=1000),
    cursor: str | None = Query(None, max_length=2048, description="next_cursor of the previous page"),
    include_counts: bool = Query(False, description="also count the matching activities by type and status"),
) -> Any:
    who = principal(request)
    reader = gw.visibility(who.namespace)
    try:
        where = VisibilityFilter(workflow_type=activity_type, status=status, search={KIND_ATTRIBUTE: ACTIVITY_KIND})
        items, next_cursor = await reader.list(where, page_size=page_size, cursor=cursor)
        counts = await reader.count(where) if include_counts else None
    except InvalidQueryError as exc:
        raise ApiError(400, "invalid_input", str(exc), field="query.cursor" if "cursor" in str(exc) else None) from exc
    return {"activities": [listed_activity(r) for r in items], "next_cursor": next_cursor, "counts": counts}
