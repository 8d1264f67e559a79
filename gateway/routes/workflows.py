"""Routes on workflow runs: start, signal, cancel, terminate, pause, unpause, reset, update, query,
read a history, list and describe."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from kadence.readmodels.visibility import VisibilityFilter
from kadence.schemas.records import StartWorkflow
from kadence.topics.archive import read_history
from kadence.topics.concurrency_reader import add_slot_positions, waited_keys
from kadence.topics.describe import describe_to_json
from kadence.topics.errors import (
    InvalidQueryError,
    ResetRejectedError,
    WorkflowAlreadyStartedError,
    WorkflowNotFoundError,
)
from kadence.topics.history_json import event_to_json
from kadence.topics.protocol import (
    cancel_body,
    check_found,
    operator_body,
    query_body,
    refusal,
    result_body,
    signal_body,
    start_body,
    update_body,
)
from kadence.topics.records import CLOSE_EVENTS
from kadence.topics.reset_request import reset_body
from kadence.topics.search_attributes import from_json, from_wire

from ..consistency import ConsistencyToken
from ..context import Gateway, GatewayContext, mutation_result, principal
from ..errors import ApiError, ErrorResponse, error_response, refused_response
from ..history_cursor import decode_cursor as _decode_cursor
from ..history_cursor import encode_cursor as _encode_cursor
from ..models import (
    QueryRequest,
    ReasonRequest,
    ResetRequest,
    ResetResponse,
    RunResponse,
    SignalRequest,
    StartRequest,
    StartResponse,
    UpdateRequest,
    UpdateResponse,
    WorkflowList,
)
from .params import (
    IDEMPOTENCY_KEY,
    KEYED_IDS,
    READ,
    TOKEN_DOC,
    TOKEN_HEADER_PARAM,
    TOKEN_QUERY,
    WRITE,
    QueryPath,
    TypePath,
    UpdatePath,
    WorkflowIdPath,
    ms,
)

__all__ = ["router"]

log = logging.getLogger(__name__)
audit = logging.getLogger("kadence.audit")

router = APIRouter(prefix="/v1")


@router.post(
    "/workflows/{workflow_type}/start",
    status_code=201,
    response_model=StartResponse,
    name="start",
    responses={**WRITE, 201: TOKEN_DOC},
    summary="Start a workflow run",
)
async def start(
    request: Request,
    gw: Gateway,
    workflow_type: TypePath,
    body: StartRequest,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> Any:
    who = principal(request)
    if body.workflow_id:
        workflow_id = body.workflow_id
    elif idempotency_key:
        workflow_id = str(uuid.uuid5(KEYED_IDS, f"{who.namespace}\n{idempotency_key}"))
    else:
        workflow_id = str(uuid.uuid4())
    payload = start_body(
        workflow_type,
        body.task_queue,
        await gw.encoded(request, body.input),
        id_reuse_policy=body.id_reuse_policy,
        run_timeout_ms=ms(body.run_timeout_seconds),
        search_attributes=from_wire(from_json(body.search_attributes)),
        execution_timeout_ms=ms(body.execution_timeout_seconds),
        cron_schedule=body.cron_schedule,
        concurrency=[
            {
                "name": lim.name,
                "value": lim.value,
                "max": lim.max,
                "per_ms": None if lim.per_seconds is None else round(lim.per_seconds * 1000),
            }
            for lim in body.concurrency
        ],
        debounce_ms=round(body.debounce_seconds * 1000),
        debounce_max_ms=round(body.debounce_max_seconds * 1000),
        priority=None
        if body.priority is None
        else {
            "priority_key": body.priority.priority_key or 0,
            "fairness_key": body.priority.fairness_key,
            "fairness_weight": body.priority.fairness_weight or 0.0,
        },
    )
    reply, headers = await gw.start(request, who, workflow_id, payload, idempotency_key, eager=body.request_eager_start)
    refused = refusal(reply, workflow_id, what=f"start of {workflow_id!r} rejected")
    if isinstance(refused, WorkflowAlreadyStartedError):
        return error_response(409, "already_started", refused.engine_message, headers=headers, run_id=reply["run_id"])
    if refused is not None:
        return error_response(400, "invalid_input", refused.engine_message, headers=headers)
    log.info("started workflow %s run %s in namespace %s", workflow_id, reply["run_id"], who.namespace)
    out = StartResponse(workflow_id=workflow_id, run_id=reply["run_id"])
    if body.wait_seconds > 0:
        await gw.wait_for_result(
            who, workflow_id, reply["run_id"], min(body.wait_seconds, gw.config.max_wait_seconds), out
        )
    return JSONResponse(out.model_dump(exclude_none=body.wait_seconds == 0), status_code=201, headers=headers)


@router.get(
    "/workflows/{workflow_id}/history",
    response_model=None,
    responses=READ,
    summary="A run's history, oldest first, in pages; optionally waits for new events",
)
async def history(
    request: Request,
    gw: Gateway,
    workflow_id: WorkflowIdPath,
    run_id: str | None = Query(None, min_length=1, max_length=200),
    page_size: int = Query(1000, ge=1, le=10_000, description="most events in one page"),
    cursor: str | None = Query(None, max_length=200, description="next_cursor of the previous page"),
    wait_seconds: float = Query(
        0, ge=0, le=60, description="long-poll: wait up to this long for events past the cursor"
    ),
    consistency_token: str | None = TOKEN_QUERY,
    token_header: str | None = TOKEN_HEADER_PARAM,
) -> Any:
    who = principal(request)
    await gw.consistent_read(who, workflow_id, consistency_token, token_header)
    engine = await gw.pool.get(who.namespace)
    after = 0
    if cursor is not None:
        after, cursor_run = _decode_cursor(cursor)
        run_id = run_id or cursor_run
        if cursor_run != run_id:
            raise ApiError(400, "invalid_input", "cursor belongs to another run", field="cursor")
    deadline = time.monotonic() + min(wait_seconds, gw.config.max_wait_seconds)
    while True:
        # Kafka while the run is there; the archive once archival removed it (marked archived)
        found = await read_history(engine, gw.archive, workflow_id, run_id)
        rid, events = found.run_id, found.events
        if run_id is not None and not events:
            raise WorkflowNotFoundError(f"run {run_id!r} of workflow {workflow_id!r} not found")
        page = [e for e in events if e["seq"] > after][:page_size]
        closed = bool(events) and events[-1]["attributes"][0] in CLOSE_EVENTS
        if page or closed or time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.2)
    last = page[-1]["seq"] if page else after
    more = any(e["seq"] > last for e in events)
    # already JSON (event_to_json): rendered as it is; FastAPI's generic encoder walked every
    # value of every event again and took half the time of a 1,000-event page (bench console)
    return JSONResponse(
        {
            "workflow_id": workflow_id,
            "run_id": rid,
            "events": [event_to_json(e, gw.converter) for e in page],
            "next_cursor": _encode_cursor(last, rid),
            "has_more": more,
            "closed": closed,
            "archived": found.archived,
        }
    )


async def with_start(
    request: Request, gw: GatewayContext, body: SignalRequest | UpdateRequest, what: str
) -> StartWorkflow | None:
    """The StartWorkflow body of a signal- or update-with-start (None when the body names no
    workflow type or task queue); one without the other is a 400."""
    if not (body.workflow_type or body.task_queue):
        return None
    if not (body.workflow_type and body.task_queue):
        raise ApiError(
            400,
            "invalid_input",
            f"{what} needs both workflow_type and task_queue",
            field="workflow_type" if not body.workflow_type else "task_queue",
        )
    return start_body(body.workflow_type, body.task_queue, await gw.encoded(request, body.start_input))


@router.post(
    "/workflows/{workflow_id}/signals",
    response_model=RunResponse,
    name="signal",
    responses={**WRITE, 200: TOKEN_DOC},
    summary="Signal a workflow (signal-with-start when workflow_type and task_queue are given)",
)
async def signal(
    request: Request,
    gw: Gateway,
    workflow_id: WorkflowIdPath,
    body: SignalRequest,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> Any:
    start = await with_start(request, gw, body, "signal-with-start")
    reply, headers = await gw.command(
        request,
        principal(request),
        workflow_id,
        "SignalWorkflow",
        signal_body(body.signal, await gw.encoded(request, body.input), identity="gateway", start=start),
        idempotency_key,
    )
    return mutation_result(reply, workflow_id, headers)


@router.post(
    "/workflows/{workflow_id}/cancel",
    response_model=RunResponse,
    name="cancel",
    responses={**WRITE, 200: TOKEN_DOC},
    summary="Request cooperative cancellation (idempotent)",
)
async def cancel(
    request: Request,
    gw: Gateway,
    workflow_id: WorkflowIdPath,
    body: ReasonRequest | None = None,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> Any:
    reply, headers = await gw.command(
        request,
        principal(request),
        workflow_id,
        "RequestCancelWorkflow",
        cancel_body(body.reason if body else ""),
        idempotency_key,
    )
    return mutation_result(reply, workflow_id, headers)


async def operator_action(
    request: Request,
    gw: GatewayContext,
    workflow_id: str,
    body_type: str,
    body: ReasonRequest | None,
    idempotency_key: str | None,
) -> JSONResponse:
    who = principal(request)
    audit.warning(
        "%s of workflow %s in namespace %s requested through the gateway by key %s",
        body_type.removesuffix("Workflow").lower(),
        workflow_id,
        who.namespace,
        who.key_id or "(no auth)",
    )
    reply, headers = await gw.command(
        request,
        who,
        workflow_id,
        body_type,
        operator_body(body.reason if body else "", "gateway"),
        idempotency_key,
    )
    return mutation_result(reply, workflow_id, headers)


@router.post(
    "/workflows/{workflow_id}/terminate",
    response_model=RunResponse,
    name="terminate",
    responses={**WRITE, 200: TOKEN_DOC},
    summary="End the run at once",
)
async def terminate(
    request: Request,
    gw: Gateway,
    workflow_id: WorkflowIdPath,
    body: ReasonRequest | None = None,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> Any:
    return await operator_action(request, gw, workflow_id, "TerminateWorkflow", body, idempotency_key)


@router.post(
    "/workflows/{workflow_id}/pause",
    response_model=RunResponse,
    name="pause",
    responses={**WRITE, 200: TOKEN_DOC},
    summary="Pause the open run: no tasks are dispatched and no timers fire until it is unpaused "
    "(signals are still recorded; idempotent)",
)
async def pause(
    request: Request,
    gw: Gateway,
    workflow_id: WorkflowIdPath,
    body: ReasonRequest | None = None,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> Any:
    return await operator_action(request, gw, workflow_id, "PauseWorkflow", body, idempotency_key)


@router.post(
    "/workflows/{workflow_id}/unpause",
    response_model=RunResponse,
    name="unpause",
    responses={**WRITE, 200: TOKEN_DOC},
    summary="Unpause the run: held tasks are sent and timers that fell due fire (idempotent)",
)
async def unpause(
    request: Request,
    gw: Gateway,
    workflow_id: WorkflowIdPath,
    body: ReasonRequest | None = None,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> Any:
    return await operator_action(request, gw, workflow_id, "UnpauseWorkflow", body, idempotency_key)


@router.post(
    "/workflows/{workflow_id}/reset",
    response_model=ResetResponse,
    name="reset",
    responses={**WRITE, 409: {"model": ErrorResponse}},
    summary="Branch a new run from a completed workflow task of the current run (open or closed); "
    "dry_run answers what the reset would do",
)
async def reset(
    request: Request,
    gw: Gateway,
    workflow_id: WorkflowIdPath,
    body: ResetRequest | None = None,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> Any:
    body = body or ResetRequest()
    who = principal(request)
    engine = await gw.pool.get(who.namespace)
    run_id, events = await engine.history(workflow_id)
    try:
        payload = reset_body(
            workflow_id,
            run_id,
            events,
            to_event=body.to_event,
            reason=body.reason,
            identity="gateway",
            dry_run=body.dry_run,
        )
    except ResetRejectedError as exc:
        return error_response(409, "reset_rejected", str(exc), run_id=run_id)
    if body.dry_run:  # nothing to claim: a dry run changes nothing, and is asked again at will
        reply = await engine.request(
            workflow_id,
            "ResetWorkflow",
            payload,
            request_id=str(uuid.uuid4()),
            run_id=run_id,
            timeout=gw.config.reply_timeout,
        )
    else:
        audit.warning(
            "reset of workflow %s in namespace %s requested through the gateway by key %s",
            workflow_id,
            who.namespace,
            who.key_id or "(no auth)",
        )
        await gw.claim_key(request, who, idempotency_key)
        reply = await engine.request(
            workflow_id,
            "ResetWorkflow",
            payload,
            request_id=idempotency_key or str(uuid.uuid4()),
            run_id=run_id,
            timeout=gw.config.reply_timeout,
        )
    refused = refused_response(reply, workflow_id, "reset_rejected", run_id=reply["run_id"])
    if refused is not None:
        return refused
    return ResetResponse(
        workflow_id=workflow_id, run_id=reply["run_id"], dry_run=body.dry_run, plan=reply["reset_plan"]
    )


@router.post(
    "/workflows/{workflow_id}/updates/{update_name}",
    response_model=UpdateResponse,
    name="update",
    responses={**WRITE, 409: {"model": ErrorResponse}},
    summary="Run a workflow's update handler and return its result (update-with-start when "
    "workflow_type and task_queue are given); a rejected update writes nothing",
)
async def update(
    request: Request,
    gw: Gateway,
    workflow_id: WorkflowIdPath,
    update_name: UpdatePath,
    body: UpdateRequest | None = None,
    idempotency_key: str | None = IDEMPOTENCY_KEY,
) -> Any:
    """The update's ID is the Idempotency-Key (a new one without it): a retry with the same key
    is the same update, recorded once, and gets the same result or error."""
    body = body or UpdateRequest()
    who = principal(request)
    start = await with_start(request, gw, body, "update-with-start")
    await gw.claim_key(request, who, idempotency_key)
    engine = await gw.pool.get(who.namespace)
    reply = await engine.request(
        workflow_id,
        "UpdateWorkflow",
        update_body(update_name, await gw.encoded(request, body.input), identity="gateway", start=start),
        request_id=idempotency_key or str(uuid.uuid4()),
        timeout=min(body.wait_seconds, gw.config.max_wait_seconds),
    )
    check_found(reply, workflow_id)
    if reply["status"] == "ok":
        return UpdateResponse(
            workflow_id=workflow_id, run_id=reply["run_id"], result=gw.converter.from_bytes(reply["result"])
        )
    failure = reply["failure"]
    code = "update_rejected" if reply["status"] == "rejected" else "update_failed"
    return error_response(
        409,
        code,
        f"{failure['type']}: {failure['message']}" if failure else reply["message"],
        run_id=reply["run_id"],
        failure={"type": failure["type"], "message": failure["message"]} if failure else None,
    )


@router.post(
    "/workflows/{workflow_id}/queries/{query_name}",
    response_model=None,
    responses={**READ, 409: {"model": ErrorResponse}},
    summary="Ask a workflow's query handler; a closed run answers from its final state (nothing is written to history)",
)
async def query(
    request: Request,
    gw: Gateway,
    workflow_id: WorkflowIdPath,
    query_name: QueryPath,
    body: QueryRequest | None = None,
    consistency_token: str | None = TOKEN_QUERY,
    token_header: str | None = TOKEN_HEADER_PARAM,
) -> Any:
    who = principal(request)
    await gw.consistent_read(who, workflow_id, consistency_token, token_header)
    engine = await gw.pool.get(who.namespace)
    reply = await engine.request(
        workflow_id,
        "QueryWorkflow",
        query_body(query_name, gw.converter.to_bytes(body.input if body else [])),
        request_id=str(uuid.uuid4()),
        timeout=gw.config.reply_timeout,
    )
    refused = refused_response(reply, workflow_id, "query_rejected")
    if refused is not None:
        return refused
    return {"workflow_id": workflow_id, "run_id": reply["run_id"], "result": gw.converter.from_bytes(reply["result"])}


@router.get(
    "/workflows",
    response_model=WorkflowList,
    name="list",
    responses=READ,
    summary="List workflow runs (from the visibility projection), newest start first",
)
async def list_workflows(
    request: Request,
    gw: Gateway,
    workflow_type: str | None = Query(None, alias="type", min_length=1, max_length=200),
    status: str | None = Query(
        None, pattern="^(running|completed|failed|canceled|terminated|continued_as_new|timed_out)$"
    ),
    start_from_ms: int | None = Query(None, ge=0, description="runs started at or after (epoch ms)"),
    start_to_ms: int | None = Query(None, ge=0, description="runs started before (epoch ms)"),
    close_from_ms: int | None = Query(None, ge=0, description="runs closed at or after (epoch ms)"),
    close_to_ms: int | None = Query(None, ge=0, description="runs closed before (epoch ms)"),
    search: list[str] = Query([], max_length=20, description="search attribute filter key:value (repeatable)"),
    paused: bool | None = Query(None, description="only paused (true) or only not paused (false) runs"),
    page_size: int = Query(100, ge=1, le=1000),
    cursor: str | None = Query(None, max_length=2048, description="next_cursor of the previous page"),
    include_counts: bool = Query(False, description="also count the matching runs by type and status"),
    consistency_token: str | None = TOKEN_QUERY,
    token_header: str | None = TOKEN_HEADER_PARAM,
) -> Any:
    who = principal(request)
    reader = gw.visibility(who.namespace)
    filters: dict[str, Any] = {}
    for item in search:
        key, sep, value = item.partition(":")
        if not sep or not key:
            raise ApiError(400, "invalid_input", "search: expected key:value", field="query.search")
        filters[key] = value
    text = consistency_token if consistency_token is not None else token_header
    if text is not None:
        try:
            token = ConsistencyToken.decode(text)
        except ValueError as exc:
            raise ApiError(400, "invalid_input", f"consistency_token: {exc}", field="consistency_token") from exc
        if token.namespace != who.namespace:
            raise ApiError(
                400, "invalid_input", "consistency_token belongs to another namespace", field="consistency_token"
            )
        if not await reader.wait_for_seq(token.workflow_id, token.run_id, token.history_seq, gw.config.reply_timeout):
            raise ApiError(
                503,
                "unavailable",
                "the visibility projection has not caught up with the "
                "consistency token yet (is `kadence projections run` up?)",
                headers=gw.retry_after(),
            )
    try:
        where = VisibilityFilter(
            workflow_type=workflow_type,
            status=status,
            start_from_ms=start_from_ms,
            start_to_ms=start_to_ms,
            close_from_ms=close_from_ms,
            close_to_ms=close_to_ms,
            search=filters or None,
            paused=paused,
        )
        items, next_cursor = await reader.list(where, page_size=page_size, cursor=cursor)
        counts = await reader.count(where) if include_counts else None
    except InvalidQueryError as exc:
        raise ApiError(400, "invalid_input", str(exc), field="query.cursor" if "cursor" in str(exc) else None) from exc
    return {
        "workflows": [{k: v for k, v in r.items() if k not in ("history_offset", "partition")} for r in items],
        "next_cursor": next_cursor,
        "counts": counts,
    }


@router.get(
    "/workflows/{workflow_id}", responses=READ, summary="Describe a workflow's current run", response_model=None
)
async def describe(
    request: Request,
    gw: Gateway,
    workflow_id: WorkflowIdPath,
    consistency_token: str | None = TOKEN_QUERY,
    token_header: str | None = TOKEN_HEADER_PARAM,
) -> Any:
    who = principal(request)
    await gw.consistent_read(who, workflow_id, consistency_token, token_header)
    engine = await gw.pool.get(who.namespace)
    reply = await engine.request(
        workflow_id,
        "AwaitWorkflowResult",
        result_body(wait=False),
        request_id=str(uuid.uuid4()),
        timeout=gw.config.reply_timeout,
    )
    check_found(reply, workflow_id)
    described = describe_to_json(workflow_id, reply, gw.converter)
    keys = waited_keys(described)
    if keys:  # where it stands in a concurrency limit's queue (its owning partitions read)
        add_slot_positions(described, await engine.read_limits(keys))
    return described
