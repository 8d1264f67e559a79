"""The HTTP gateway: JSON over HTTP for services that do not use the Python SDK.

Operations turn requests into command records on ``{ns}.commands`` and wait for the engine's
reply; reads come from the engine and Kafka (a Redis read model can be put behind the
read-your-writes hook, ``GatewayConfig.read_your_writes``). Every ``/v1`` request passes the guard
first (API key, namespace, quota: ``guard.py``); errors are typed (``errors.py``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import json
import logging
import time
import uuid
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Header, Path, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from redis.exceptions import RedisError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from kadence.topics.archive import open_store, read_history
from kadence.topics.batch import BATCH_TASK_QUEUE, BATCH_WORKFLOW_TYPE, BatchRequest
from kadence.topics.builds import build_backlogs
from kadence.topics.codec_metrics import register_codec_metrics
from kadence.topics.config import NAMESPACE_RE, KafkaConfig
from kadence.topics.dead_letters import list_dead_letters, redrive
from kadence.topics.describe import describe_to_json
from kadence.topics.engine_client import EngineClient
from kadence.topics.errors import (
    ArchiveError,
    BrokerUnavailableError,
    ConfigError,
    InvalidQueryError,
    KadenceError,
    NoReplyError,
    PayloadTooLargeError,
    ResetRejectedError,
    SchemaError,
    WorkflowNotFoundError,
    WorkflowQuarantinedError,
)
from kadence.topics.history_json import event_to_json
from kadence.topics.payload import JsonConverter
from kadence.topics.protocol import signal_body, start_body
from kadence.topics.records import CLOSE_EVENTS
from kadence.topics.reset_request import reset_body
from kadence.topics.state_reader import stuck_rows
from kadence.topics.visibility import VisibilityReader, projection_lag

from .config import GatewayConfig
from .consistency import TOKEN_HEADER, ConsistencyToken
from .console import mount_console
from .engines import EnginePool, NamespaceUnavailable
from .errors import ApiError, ErrorResponse, error_response
from .guard import NAMESPACE_HEADER, Guard, Principal
from .history_cursor import decode_cursor as _decode_cursor
from .history_cursor import encode_cursor as _encode_cursor
from .idempotency import IdempotencyStore, fingerprint
from .keys import ApiKeyStore
from .limits import RateLimiter
from .middleware import BodyLimits, EncodedSlashes, GuardRequests, Observe, TraceContext
from .models import (
    BatchStarted,
    DecodeRequest,
    NameParam,
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
    WorkflowIdInPath,
    WorkflowList,
)
from .redis_breaker import RedisBreaker, guarded_redis

__all__ = ["create_app"]

# validated path parameters (in Annotated, so that their validators run; module level, so that
# FastAPI resolves them under `from __future__ import annotations`)
WorkflowIdPath = Annotated[WorkflowIdInPath, Path(description="the workflow ID; a / in it is sent encoded, as %2F")]
TypePath = Annotated[NameParam, Path(description="the workflow type")]
QueryPath = Annotated[NameParam, Path(description="the query's name")]
UpdatePath = Annotated[NameParam, Path(description="the update's name")]

log = logging.getLogger(__name__)
audit = logging.getLogger("kadence.audit")


#: a workflow ID derived from an Idempotency-Key: a retried start without workflow_id starts nothing new
_KEYED_IDS = uuid.UUID("6b1d3c3e-95c2-4c55-9a53-3f1f0cbe2a61")


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else max(1, int(seconds * 1000))


def _responses(*statuses: int) -> dict:
    return {s: {"model": ErrorResponse} for s in statuses}


_COMMON = (400, 401, 403, 404, 413, 415, 429, 503)
_READ = _responses(*_COMMON)
_WRITE = _responses(*_COMMON, 409, 422)
_TOKEN_DOC = {
    "headers": {
        TOKEN_HEADER: {
            "description": "opaque consistency token: pass it to a later read (header or ?consistency_token=) "
            "to read at least this change",
            "schema": {"type": "string"},
        }
    }
}

#: stable codes of the HTTP errors that routing and body parsing raise before an operation runs
_HTTP_CODES = {400: "invalid_input", 404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}

_bearer = HTTPBearer(auto_error=False, description="an API key from `kadence keys create` (not with --no-auth)")


async def _documented(
    _credentials=Security(_bearer),
    _namespace: str | None = Header(
        None,
        alias=NAMESPACE_HEADER,
        pattern=NAMESPACE_RE.pattern,
        description="the namespace to act in; default: the API key's",
    ),
):
    """Puts the API key and the namespace header in the OpenAPI document; the guard middleware has
    already checked both before routing. ``async``: a plain ``def`` dependency would run in a
    worker thread on every request."""


_IDEMPOTENCY_KEY = Header(
    None,
    min_length=1,
    max_length=200,
    description="the command's request ID: a retry with the same key gets the first "
    "answer; reusing it for another request is a 422",
)
_TOKEN_QUERY = Query(None, max_length=2048, description=f"a {TOKEN_HEADER} from an earlier response")
_TOKEN_HEADER_PARAM = Header(
    None,
    alias=TOKEN_HEADER,
    max_length=2048,
    description="a consistency token from an earlier response (same as the query parameter)",
)


def create_app(config: GatewayConfig, *, engine: EngineClient | None = None) -> FastAPI:
    """The gateway app. ``engine``: an already connected client for ``config.kafka.namespace``
    (tests); otherwise one is created per namespace on first use."""
    converter = JsonConverter(config.codec, large=config.large_payloads.open())
    pool = EnginePool(config.kafka, preset={config.kafka.namespace: engine} if engine else None)
    redis = None
    if config.redis_url:
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        # no client-side retries, and no calls while Redis is known down (``redis_breaker``):
        # a Redis outage must become a prompt 503, not a slow one
        redis = guarded_redis(
            config.redis_url,
            RedisBreaker(config.redis_fail_fast_seconds),
            socket_timeout=2,
            socket_connect_timeout=1,
            retry=Retry(NoBackoff(), 0),
        )
    guard = Guard(
        config,
        ApiKeyStore(redis, config.redis_prefix) if redis else None,
        RateLimiter(redis, config.redis_prefix) if redis else None,
    )
    archive = open_store(config.archive) if config.archive is not None else None
    idempotency = IdempotencyStore(redis, config.redis_prefix, config.idempotency_ttl_seconds) if redis else None
    if not config.auth:
        log.warning("the gateway runs WITHOUT authentication (--no-auth): development only")

    @asynccontextmanager
    async def lifespan(_app):
        try:
            await pool.get(config.kafka.namespace)
        except KadenceError as exc:  # a gateway may serve only other namespaces
            log.warning("namespace %s not connected at start-up: %s", config.kafka.namespace, exc)
        yield
        await app.state.console_api.aclose()
        await pool.close()
        if redis is not None:
            await redis.aclose()

    app = FastAPI(
        title="Kadence gateway",
        version="0.2.0",
        lifespan=lifespan,
        description="Start, signal, cancel, terminate, query and read workflows over HTTP. See docs/gateway.md.",
    )
    app.state.config = config
    app.state.engines = pool

    registry = CollectorRegistry()
    register_codec_metrics(registry)
    requests_total = Counter(
        "kadence_gateway_requests", "HTTP requests", ["method", "route", "status"], registry=registry
    )
    latency = Histogram(
        "kadence_gateway_request_seconds",
        "HTTP request latency",
        ["route"],
        registry=registry,
        buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 15, 30),
    )

    # plain ASGI middleware (gateway/middleware.py); the last added runs first -> observe, trace
    # context, guard, body limits, encoded slashes, then routing
    app.add_middleware(EncodedSlashes)
    app.add_middleware(BodyLimits, max_body_bytes=config.max_body_bytes)
    app.add_middleware(GuardRequests, guard=guard)
    app.add_middleware(TraceContext)
    app.add_middleware(Observe, requests_total=requests_total, latency=latency)

    @app.exception_handler(ApiError)
    async def on_api_error(_request: Request, exc: ApiError):
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def on_invalid(_request: Request, exc: RequestValidationError):
        err = exc.errors()[0] if exc.errors() else {}
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "path")]
        if err.get("type") == "json_invalid":
            return error_response(400, "invalid_json", "request body is not valid JSON")
        field_name = ".".join(loc) or None
        return error_response(400, "invalid_input", f"{field_name or 'body'}: {err.get('msg', 'invalid')}", field_name)

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(_request: Request, exc: StarletteHTTPException):
        # unknown routes, wrong methods, bodies that cannot be parsed: same error shape as the rest
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        return error_response(exc.status_code, code, str(exc.detail), headers=getattr(exc, "headers", None))

    def _unavailable(message: str) -> JSONResponse:
        return error_response(503, "unavailable", message, headers={"Retry-After": str(config.retry_after_seconds)})

    @app.exception_handler(NoReplyError)
    async def on_no_reply(_request: Request, exc: NoReplyError):
        # Kafka took the command and no history processor answered in time: the command stands
        # and is applied when a processor runs; sent again with the same Idempotency-Key, once
        return error_response(503, "no_reply", str(exc), headers={"Retry-After": str(config.retry_after_seconds)})

    @app.exception_handler(BrokerUnavailableError)
    async def on_unavailable(_request: Request, exc: BrokerUnavailableError):
        return _unavailable(str(exc))

    @app.exception_handler(NamespaceUnavailable)
    async def on_namespace_unavailable(_request: Request, exc: NamespaceUnavailable):
        return _unavailable(str(exc))

    @app.exception_handler(WorkflowQuarantinedError)
    async def on_quarantined(_request: Request, exc: WorkflowQuarantinedError):
        # nothing was applied; the command waits in the dead-letter topic for an operator
        return error_response(503, "quarantined", str(exc))

    @app.exception_handler(WorkflowNotFoundError)
    async def on_not_found(_request: Request, exc: WorkflowNotFoundError):
        return error_response(404, "not_found", str(exc))

    @app.exception_handler(ArchiveError)
    async def on_store_unavailable(_request: Request, exc: ArchiveError):
        # the payload store (or the archive) did not answer: retry later, nothing was sent
        return _unavailable(str(exc))

    @app.exception_handler(PayloadTooLargeError)
    async def on_payload_too_large(_request: Request, exc: PayloadTooLargeError):
        return error_response(
            413,
            "payload_too_large",
            f"{exc} (the gateway accepts request bodies up to {config.max_body_bytes} bytes; "
            f"a command must also fit Kafka's limit of {exc.limit} bytes)",
        )

    @app.exception_handler(KadenceError)
    async def on_kadence(_request: Request, exc: KadenceError):
        return error_response(400, "invalid_input", str(exc))

    @app.exception_handler(RedisError)
    async def on_redis_down(_request: Request, exc: RedisError):
        log.warning("Redis unavailable: %s", type(exc).__name__)
        return _unavailable("Redis did not answer; retry later")

    @app.exception_handler(Exception)
    async def on_bug(request: Request, exc: Exception):
        # the trace goes to the gateway's log, never to the client
        log.error(
            "unexpected error in %s %s",
            request.method,
            request.scope.get("route") and request.scope["route"].path,
            exc_info=exc,
        )
        return error_response(500, "internal_error", "unexpected error (logged by the gateway)")

    # -- helpers shared by the operations ------------------------------------------------------

    def principal(request: Request) -> Principal:
        return request.scope["kadence.principal"]

    async def claim_key(request: Request, who: Principal, key: str | None) -> None:
        """422 when ``key`` was first used for another request (checked on every instance)."""
        if key is None or idempotency is None:
            return
        body = await request.body()
        try:
            same = await idempotency.claim(who.namespace, key, fingerprint(request.method, request.url.path, body))
        except (RedisError, OSError) as exc:
            raise ApiError(
                503,
                "unavailable",
                "Redis (idempotency keys) did not answer; retry later",
                headers={"Retry-After": str(config.retry_after_seconds)},
            ) from exc
        if not same:
            raise ApiError(
                422,
                "idempotency_key_reused",
                "this Idempotency-Key was first used for a different request (method, path or body)",
                field="Idempotency-Key",
            )

    async def command(
        request: Request, who: Principal, workflow_id: str, body_type: str, payload: dict, key: str | None
    ) -> tuple[dict, dict]:
        """Produce one command (after the idempotency check) and wait for its reply; returns the
        reply and the response headers (the consistency token)."""
        await claim_key(request, who, key)
        engine = await pool.get(who.namespace)
        reply = await engine.request(
            workflow_id, body_type, payload, request_id=key or str(uuid.uuid4()), timeout=config.reply_timeout
        )
        headers = {}
        if reply.get("history_seq") is not None and reply.get("run_id"):
            headers[TOKEN_HEADER] = ConsistencyToken(
                who.namespace, workflow_id, reply["run_id"], reply["history_seq"]
            ).encode()
        return reply, headers

    async def consistent_read(
        who: Principal, workflow_id: str, query_token: str | None, header_token: str | None
    ) -> None:
        """Validate a consistency token and wait (via the hook) until reads reflect it."""
        text = query_token if query_token is not None else header_token
        if text is None:
            return
        try:
            token = ConsistencyToken.decode(text)
        except ValueError as exc:
            raise ApiError(400, "invalid_input", f"consistency_token: {exc}", field="consistency_token") from exc
        if token.namespace != who.namespace or token.workflow_id != workflow_id:
            raise ApiError(
                400, "invalid_input", "consistency_token belongs to another workflow", field="consistency_token"
            )
        await config.read_your_writes(who.namespace, token)

    def mutation_result(reply: dict, workflow_id: str, headers: dict):
        if reply["status"] == "not_found":
            raise WorkflowNotFoundError(reply["message"] or f"workflow {workflow_id!r} not found")
        if reply["status"] != "ok":
            return error_response(409, "not_running", reply["message"] or reply["status"], headers=headers)
        return JSONResponse(RunResponse(workflow_id=workflow_id, run_id=reply["run_id"]).model_dump(), headers=headers)

    # -- operations ----------------------------------------------------------------------------

    v1 = APIRouter(prefix="/v1", dependencies=[Depends(_documented)])

    @v1.post(
        "/workflows/{workflow_type}/start",
        status_code=201,
        response_model=StartResponse,
        name="start",
        responses={**_WRITE, 201: _TOKEN_DOC},
        summary="Start a workflow run",
    )
    async def start(
        request: Request, workflow_type: TypePath, body: StartRequest, idempotency_key: str | None = _IDEMPOTENCY_KEY
    ):
        who = principal(request)
        if body.workflow_id:
            workflow_id = body.workflow_id
        elif idempotency_key:
            workflow_id = str(uuid.uuid5(_KEYED_IDS, f"{who.namespace}\n{idempotency_key}"))
        else:
            workflow_id = str(uuid.uuid4())
        payload = start_body(
            workflow_type,
            body.task_queue,
            await _encoded(request, body.input),
            id_reuse_policy=body.id_reuse_policy,
            run_timeout_ms=_ms(body.run_timeout_seconds),
            search_attributes=body.search_attributes,
            execution_timeout_ms=_ms(body.execution_timeout_seconds),
        )
        reply, headers = await command(request, who, workflow_id, "StartWorkflow", payload, idempotency_key)
        if reply["status"] == "already_started":
            return error_response(409, "already_started", reply["message"], headers=headers, run_id=reply["run_id"])
        if reply["status"] != "ok":
            return error_response(400, "invalid_input", reply["message"] or reply["status"], headers=headers)
        log.info("started workflow %s run %s in namespace %s", workflow_id, reply["run_id"], who.namespace)
        out = StartResponse(workflow_id=workflow_id, run_id=reply["run_id"])
        if body.wait_seconds > 0:
            await _wait_for_result(
                who, workflow_id, reply["run_id"], min(body.wait_seconds, config.max_wait_seconds), out
            )
        return JSONResponse(out.model_dump(exclude_none=body.wait_seconds == 0), status_code=201, headers=headers)

    async def _encoded(request: Request, value) -> bytes:
        """``value`` as payload bytes; a body over the large-payload threshold is encoded (and
        stored) on a worker thread, so the event loop does not wait for the store."""
        if int(request.headers.get("content-length") or 0) > converter.large.threshold:
            return await run_in_threadpool(converter.to_bytes, value)
        return converter.to_bytes(value)

    async def _wait_for_result(
        who: Principal, workflow_id: str, run_id: str, seconds: float, out: StartResponse
    ) -> None:
        """Fill ``out`` with the run's outcome if it closes within ``seconds`` (else status running)."""
        engine = await pool.get(who.namespace)
        try:
            reply = await engine.request(
                workflow_id,
                "AwaitWorkflowResult",
                {"wait": True},
                run_id=run_id,
                request_id=str(uuid.uuid4()),
                timeout=seconds,
            )
        except BrokerUnavailableError:  # the deadline passed (or the engine is slow): still running
            out.status = "running"
            return
        out.status = reply["status"]
        if reply["status"] == "completed":
            out.result = converter.from_bytes(reply["result"])
        elif reply["failure"]:
            out.failure = {"type": reply["failure"]["type"], "message": reply["failure"]["message"]}

    @v1.get(
        "/workflows/{workflow_id}/history",
        responses=_READ,
        summary="A run's history, oldest first, in pages; optionally waits for new events",
    )
    async def history(
        request: Request,
        workflow_id: WorkflowIdPath,
        run_id: str | None = Query(None, min_length=1, max_length=200),
        page_size: int = Query(1000, ge=1, le=10_000, description="most events in one page"),
        cursor: str | None = Query(None, max_length=200, description="next_cursor of the previous page"),
        wait_seconds: float = Query(
            0, ge=0, le=60, description="long-poll: wait up to this long for events past the cursor"
        ),
        consistency_token: str | None = _TOKEN_QUERY,
        token_header: str | None = _TOKEN_HEADER_PARAM,
    ):
        who = principal(request)
        await consistent_read(who, workflow_id, consistency_token, token_header)
        engine = await pool.get(who.namespace)
        after = 0
        if cursor is not None:
            after, cursor_run = _decode_cursor(cursor)
            run_id = run_id or cursor_run
            if cursor_run != run_id:
                raise ApiError(400, "invalid_input", "cursor belongs to another run", field="cursor")
        deadline = time.monotonic() + min(wait_seconds, config.max_wait_seconds)
        while True:
            # Kafka while the run is there; the archive once archival removed it (marked archived)
            found = await read_history(engine, archive, workflow_id, run_id)
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
                "events": [event_to_json(e, converter) for e in page],
                "next_cursor": _encode_cursor(last, rid),
                "has_more": more,
                "closed": closed,
                "archived": found.archived,
            }
        )

    async def with_start(request: Request, body: SignalRequest | UpdateRequest, what: str) -> dict | None:
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
        return start_body(body.workflow_type, body.task_queue, await _encoded(request, body.start_input))

    @v1.post(
        "/workflows/{workflow_id}/signals",
        response_model=RunResponse,
        name="signal",
        responses={**_WRITE, 200: _TOKEN_DOC},
        summary="Signal a workflow (signal-with-start when workflow_type and task_queue are given)",
    )
    async def signal(
        request: Request,
        workflow_id: WorkflowIdPath,
        body: SignalRequest,
        idempotency_key: str | None = _IDEMPOTENCY_KEY,
    ):
        start = await with_start(request, body, "signal-with-start")
        reply, headers = await command(
            request,
            principal(request),
            workflow_id,
            "SignalWorkflow",
            signal_body(body.signal, await _encoded(request, body.input), identity="gateway", start=start),
            idempotency_key,
        )
        return mutation_result(reply, workflow_id, headers)

    @v1.post(
        "/workflows/{workflow_id}/cancel",
        response_model=RunResponse,
        name="cancel",
        responses={**_WRITE, 200: _TOKEN_DOC},
        summary="Request cooperative cancellation (idempotent)",
    )
    async def cancel(
        request: Request,
        workflow_id: WorkflowIdPath,
        body: ReasonRequest | None = None,
        idempotency_key: str | None = _IDEMPOTENCY_KEY,
    ):
        reply, headers = await command(
            request,
            principal(request),
            workflow_id,
            "RequestCancelWorkflow",
            {"reason": body.reason if body else ""},
            idempotency_key,
        )
        return mutation_result(reply, workflow_id, headers)

    async def operator_action(
        request: Request, workflow_id: str, body_type: str, body: ReasonRequest | None, idempotency_key: str | None
    ):
        who = principal(request)
        audit.warning(
            "%s of workflow %s in namespace %s requested through the gateway by key %s",
            body_type.removesuffix("Workflow").lower(),
            workflow_id,
            who.namespace,
            who.key_id or "(no auth)",
        )
        reply, headers = await command(
            request,
            who,
            workflow_id,
            body_type,
            {"reason": body.reason if body else "", "identity": "gateway"},
            idempotency_key,
        )
        return mutation_result(reply, workflow_id, headers)

    @v1.post(
        "/workflows/{workflow_id}/terminate",
        response_model=RunResponse,
        name="terminate",
        responses={**_WRITE, 200: _TOKEN_DOC},
        summary="End the run at once",
    )
    async def terminate(
        request: Request,
        workflow_id: WorkflowIdPath,
        body: ReasonRequest | None = None,
        idempotency_key: str | None = _IDEMPOTENCY_KEY,
    ):
        return await operator_action(request, workflow_id, "TerminateWorkflow", body, idempotency_key)

    @v1.post(
        "/workflows/{workflow_id}/pause",
        response_model=RunResponse,
        name="pause",
        responses={**_WRITE, 200: _TOKEN_DOC},
        summary="Pause the open run: no tasks are dispatched and no timers fire until it is unpaused "
        "(signals are still recorded; idempotent)",
    )
    async def pause(
        request: Request,
        workflow_id: WorkflowIdPath,
        body: ReasonRequest | None = None,
        idempotency_key: str | None = _IDEMPOTENCY_KEY,
    ):
        return await operator_action(request, workflow_id, "PauseWorkflow", body, idempotency_key)

    @v1.post(
        "/workflows/{workflow_id}/unpause",
        response_model=RunResponse,
        name="unpause",
        responses={**_WRITE, 200: _TOKEN_DOC},
        summary="Unpause the run: held tasks are sent and timers that fell due fire (idempotent)",
    )
    async def unpause(
        request: Request,
        workflow_id: WorkflowIdPath,
        body: ReasonRequest | None = None,
        idempotency_key: str | None = _IDEMPOTENCY_KEY,
    ):
        return await operator_action(request, workflow_id, "UnpauseWorkflow", body, idempotency_key)

    @v1.post(
        "/workflows/{workflow_id}/reset",
        response_model=ResetResponse,
        name="reset",
        responses={**_WRITE, 409: {"model": ErrorResponse}},
        summary="Branch a new run from a completed workflow task of the current run (open or closed); "
        "dry_run answers what the reset would do",
    )
    async def reset(
        request: Request,
        workflow_id: WorkflowIdPath,
        body: ResetRequest | None = None,
        idempotency_key: str | None = _IDEMPOTENCY_KEY,
    ):
        body = body or ResetRequest()
        who = principal(request)
        engine = await pool.get(who.namespace)
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
                timeout=config.reply_timeout,
            )
        else:
            audit.warning(
                "reset of workflow %s in namespace %s requested through the gateway by key %s",
                workflow_id,
                who.namespace,
                who.key_id or "(no auth)",
            )
            await claim_key(request, who, idempotency_key)
            reply = await engine.request(
                workflow_id,
                "ResetWorkflow",
                payload,
                request_id=idempotency_key or str(uuid.uuid4()),
                run_id=run_id,
                timeout=config.reply_timeout,
            )
        if reply["status"] == "not_found":
            raise WorkflowNotFoundError(reply["message"] or f"workflow {workflow_id!r} not found")
        if reply["status"] != "ok":
            return error_response(409, "reset_rejected", reply["message"], run_id=reply["run_id"])
        return ResetResponse(
            workflow_id=workflow_id, run_id=reply["run_id"], dry_run=body.dry_run, plan=reply["reset_plan"]
        )

    @v1.post(
        "/workflows/{workflow_id}/updates/{update_name}",
        response_model=UpdateResponse,
        name="update",
        responses={**_WRITE, 409: {"model": ErrorResponse}},
        summary="Run a workflow's update handler and return its result (update-with-start when "
        "workflow_type and task_queue are given); a rejected update writes nothing",
    )
    async def update(
        request: Request,
        workflow_id: WorkflowIdPath,
        update_name: UpdatePath,
        body: UpdateRequest | None = None,
        idempotency_key: str | None = _IDEMPOTENCY_KEY,
    ):
        """The update's ID is the Idempotency-Key (a new one without it): a retry with the same key
        is the same update, recorded once, and gets the same result or error."""
        body = body or UpdateRequest()
        who = principal(request)
        start = await with_start(request, body, "update-with-start")
        await claim_key(request, who, idempotency_key)
        engine = await pool.get(who.namespace)
        reply = await engine.request(
            workflow_id,
            "UpdateWorkflow",
            {
                "update_name": update_name,
                "input": await _encoded(request, body.input),
                "start": start,
                "identity": "gateway",
            },
            request_id=idempotency_key or str(uuid.uuid4()),
            timeout=min(body.wait_seconds, config.max_wait_seconds),
        )
        if reply["status"] == "not_found":
            raise WorkflowNotFoundError(reply["message"] or f"workflow {workflow_id!r} not found")
        if reply["status"] == "ok":
            return UpdateResponse(
                workflow_id=workflow_id, run_id=reply["run_id"], result=converter.from_bytes(reply["result"])
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

    @v1.post(
        "/workflows/{workflow_id}/queries/{query_name}",
        responses={**_READ, 409: {"model": ErrorResponse}},
        summary="Ask a workflow's query handler; a closed run answers from its final state (nothing is written to history)",
    )
    async def query(
        request: Request,
        workflow_id: WorkflowIdPath,
        query_name: QueryPath,
        body: QueryRequest | None = None,
        consistency_token: str | None = _TOKEN_QUERY,
        token_header: str | None = _TOKEN_HEADER_PARAM,
    ):
        who = principal(request)
        await consistent_read(who, workflow_id, consistency_token, token_header)
        engine = await pool.get(who.namespace)
        reply = await engine.request(
            workflow_id,
            "QueryWorkflow",
            {"query_name": query_name, "input": converter.to_bytes(body.input if body else [])},
            request_id=str(uuid.uuid4()),
            timeout=config.reply_timeout,
        )
        if reply["status"] == "not_found":
            raise WorkflowNotFoundError(reply["message"])
        if reply["status"] != "ok":
            return error_response(409, "query_rejected", reply["message"] or reply["status"])
        return {"workflow_id": workflow_id, "run_id": reply["run_id"], "result": converter.from_bytes(reply["result"])}

    @v1.post(
        "/batches",
        status_code=201,
        response_model=BatchStarted,
        name="batch",
        responses={**_WRITE, 409: {"model": ErrorResponse}},
        summary="Start a batch operation (signal, cancel, terminate, pause, unpause or reset every run a "
        "visibility filter matches), run server-side by `kadence batch worker`",
    )
    async def start_batch(request: Request, body: BatchRequest, idempotency_key: str | None = _IDEMPOTENCY_KEY):
        who = principal(request)
        try:
            body.check()
        except ConfigError as exc:
            raise ApiError(400, "invalid_input", str(exc)) from exc
        batch_id = (
            f"batch-{uuid.uuid5(_KEYED_IDS, f'{who.namespace}/batch/{idempotency_key}')}"
            if idempotency_key
            else f"batch-{uuid.uuid4()}"
        )
        audit.warning(
            "batch %s (%s) in namespace %s requested through the gateway by key %s",
            batch_id,
            body.operation,
            who.namespace,
            who.key_id or "(no auth)",
        )
        payload = {
            "workflow_type": BATCH_WORKFLOW_TYPE,
            "task_queue": BATCH_TASK_QUEUE,
            "input": converter.to_bytes([dataclasses.asdict(body)]),
            "id_reuse_policy": "allow_duplicate",
            "run_timeout_ms": None,
            "search_attributes": {},
        }
        reply, headers = await command(request, who, batch_id, "StartWorkflow", payload, idempotency_key)
        if reply["status"] == "already_started":
            return error_response(409, "already_started", reply["message"], headers=headers, run_id=reply["run_id"])
        return JSONResponse(
            BatchStarted(batch_id=batch_id, run_id=reply["run_id"]).model_dump(), status_code=201, headers=headers
        )

    @v1.get(
        "/batches/{batch_id}",
        responses={**_READ, 409: {"model": ErrorResponse}},
        name="batch_progress",
        summary="A batch's progress: runs done of the total, failures with their reasons",
    )
    async def batch_progress(request: Request, batch_id: WorkflowIdPath):
        who = principal(request)
        engine = await pool.get(who.namespace)
        reply = await engine.request(
            batch_id,
            "QueryWorkflow",
            {"query_name": "progress", "input": converter.to_bytes([])},
            request_id=str(uuid.uuid4()),
            timeout=config.reply_timeout,
        )
        if reply["status"] == "not_found":
            raise WorkflowNotFoundError(reply["message"])
        if reply["status"] != "ok":
            return error_response(409, "query_rejected", reply["message"] or reply["status"])
        return {"batch_id": batch_id, **converter.from_bytes(reply["result"])}

    # -- operator views: stuck workflows, dead letters, builds (blocking topic reads: a thread each)

    def namespace_config(who: Principal) -> KafkaConfig:
        return dataclasses.replace(config.kafka, namespace=who.namespace)

    @v1.get(
        "/stuck",
        responses=_READ,
        name="stuck",
        summary="Running workflows whose last workflow task failed (non-determinism, undecodable payload), "
        "with the error (reads the state topic)",
    )
    async def stuck(request: Request):
        rows = await run_in_threadpool(stuck_rows, namespace_config(principal(request)))
        return {"workflows": rows}

    @v1.get(
        "/dead-letters",
        responses=_READ,
        name="dead_letters",
        summary="Records a component could not process, with their origin, reason and whether they were redriven",
    )
    async def dead_letters(request: Request):
        entries = await run_in_threadpool(list_dead_letters, namespace_config(principal(request)))
        return {"dead_letters": [e.summary() for e in entries]}

    @v1.post(
        "/dead-letters/{ref}/redrive",
        responses={**_WRITE, 409: {"model": ErrorResponse}},
        name="redrive",
        summary="Put a dead letter back on its origin topic, once",
    )
    async def redrive_dead_letter(request: Request, ref: str = Path(pattern=r"^[0-9]+:[0-9]+$", max_length=40)):
        who = principal(request)
        audit.warning(
            "redrive of dead letter %s in namespace %s requested through the gateway by key %s",
            ref,
            who.namespace,
            who.key_id or "(no auth)",
        )
        try:
            entry = await run_in_threadpool(lambda: redrive(namespace_config(who), ref, identity="gateway"))
        except BrokerUnavailableError:
            raise
        except KadenceError as exc:  # unknown, or redriven already
            return error_response(409, "redrive_rejected", str(exc))
        return {"ref": ref, "origin_topic": entry.record["origin_topic"]}

    @v1.get(
        "/builds",
        responses=_READ,
        name="builds",
        summary="Every worker build of every task queue: the default, the backlog and its oldest task's age",
    )
    async def builds(request: Request):
        rows = await run_in_threadpool(build_backlogs, namespace_config(principal(request)))
        return {
            "builds": [
                {
                    "task_queue": b.task_queue,
                    "build_id": b.build_id,
                    "default": b.is_default,
                    "backlog": b.backlog,
                    "oldest_task_age_s": b.oldest_age_s,
                }
                for b in rows
            ]
        }

    @v1.post(
        "/codec/decode",
        responses=_READ,
        summary="Payloads from the log (base64), decoded through the gateway's codec (KADENCE_CODEC) to JSON",
    )
    async def decode_payloads(request: Request, body: DecodeRequest):
        """What a console shows an authorised user: each payload's value, or why it could not be
        decoded (``{"error": ...}``, never the bytes). Nothing is read or written but the request."""
        principal(request)
        out = []
        for text in body.payloads:
            try:
                out.append({"value": converter.from_bytes(base64.b64decode(text, validate=True))})
            except (binascii.Error, ValueError):
                out.append({"error": "not base64"})
            except SchemaError as exc:
                out.append({"error": str(exc)})
        return {"payloads": out, "codec": type(config.codec).__name__ if config.codec is not None else None}

    @v1.get(
        "/workflows",
        response_model=WorkflowList,
        name="list",
        responses=_READ,
        summary="List workflow runs (from the visibility projection), newest start first",
    )
    async def list_workflows(
        request: Request,
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
        consistency_token: str | None = _TOKEN_QUERY,
        token_header: str | None = _TOKEN_HEADER_PARAM,
    ):
        who = principal(request)
        if redis is None:
            raise ApiError(
                503,
                "unavailable",
                "listing needs Redis (the visibility projection); start the gateway with KADENCE_REDIS_URL",
                headers={"Retry-After": str(config.retry_after_seconds)},
            )
        filters: dict = {}
        for item in search:
            key, sep, value = item.partition(":")
            if not sep or not key:
                raise ApiError(400, "invalid_input", "search: expected key:value", field="query.search")
            filters[key] = value
        reader = VisibilityReader(redis, who.namespace)
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
            if not await reader.wait_for_seq(token.workflow_id, token.run_id, token.history_seq, config.reply_timeout):
                raise ApiError(
                    503,
                    "unavailable",
                    "the visibility projection has not caught up with the "
                    "consistency token yet (is `kadence projections run` up?)",
                    headers={"Retry-After": str(config.retry_after_seconds)},
                )
        query = dict(
            workflow_type=workflow_type,
            status=status,
            start_from_ms=start_from_ms,
            start_to_ms=start_to_ms,
            close_from_ms=close_from_ms,
            close_to_ms=close_to_ms,
            search=filters or None,
            paused=paused,
        )
        try:
            items, next_cursor = await reader.list(**query, page_size=page_size, cursor=cursor)
            counts = await reader.count(**query) if include_counts else None
        except InvalidQueryError as exc:
            raise ApiError(
                400, "invalid_input", str(exc), field="query.cursor" if "cursor" in str(exc) else None
            ) from exc
        return {
            "workflows": [{k: v for k, v in r.items() if k not in ("history_offset", "partition")} for r in items],
            "next_cursor": next_cursor,
            "counts": counts,
        }

    @v1.get("/workflows/{workflow_id}", responses=_READ, summary="Describe a workflow's current run")
    async def describe(
        request: Request,
        workflow_id: WorkflowIdPath,
        consistency_token: str | None = _TOKEN_QUERY,
        token_header: str | None = _TOKEN_HEADER_PARAM,
    ):
        who = principal(request)
        await consistent_read(who, workflow_id, consistency_token, token_header)
        engine = await pool.get(who.namespace)
        reply = await engine.request(
            workflow_id,
            "AwaitWorkflowResult",
            {"wait": False},
            request_id=str(uuid.uuid4()),
            timeout=config.reply_timeout,
        )
        if reply["status"] == "not_found":
            raise WorkflowNotFoundError(reply["message"])
        return describe_to_json(workflow_id, reply, converter)

    app.include_router(v1)
    mount_console(app, guard, auth=config.auth)

    # -- operations endpoints (no API key) -----------------------------------------------------

    @app.get("/readyz", summary="Readiness: the broker (and Redis, when configured) answer")
    async def readyz():
        checks: dict = {}
        try:
            engine = await asyncio.wait_for(pool.get(config.kafka.namespace), 10)
            await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(None, engine.topics.existing), 5)
            checks["kafka"] = "ok"
        except (TimeoutError, KadenceError) as exc:
            checks["kafka"] = f"unavailable: {exc or 'timeout'}"
        if redis is not None:
            try:
                await redis.ping()
                checks["redis"] = "ok"
            except (RedisError, OSError) as exc:
                checks["redis"] = f"unavailable: {type(exc).__name__}"
        ready = all(v == "ok" for v in checks.values())
        detail: dict = {}
        if redis is not None and checks.get("redis") == "ok":
            try:  # informative: a lagging projection does not make the gateway unready
                detail["projections"] = await asyncio.wait_for(projection_lag(redis, config.kafka.namespace), 5)
            except (TimeoutError, RedisError, OSError) as exc:
                detail["projections"] = {"error": type(exc).__name__}
        if ready:
            return {"status": "ready", "checks": checks, **detail}
        down = ", ".join(k for k, v in checks.items() if v != "ok")
        return JSONResponse(
            {
                "status": "unavailable",
                "checks": checks,
                "error": {"code": "unavailable", "message": f"not ready: {down}"},
            },
            status_code=503,
            headers={"Retry-After": str(config.retry_after_seconds)},
        )

    @app.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse)
    async def metrics():
        return PlainTextResponse(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz", summary="Liveness")
    async def healthz():
        return {"status": "ok"}

    def openapi() -> dict:
        # FastAPI documents its own 422 (HTTPValidationError) for every operation with parameters;
        # this gateway answers invalid input with a 400 ErrorResponse, and its only 422 is
        # idempotency_key_reused (an ErrorResponse), so FastAPI's must go
        if app.openapi_schema is None:
            spec = FastAPI.openapi(app)
            for operations in spec.get("paths", {}).values():
                for operation in operations.values():
                    responses = operation.get("responses", {})
                    if "HTTPValidationError" in json.dumps(responses.get("422", {})):
                        responses.pop("422")
            schemas = spec.get("components", {}).get("schemas", {})
            for name in ("HTTPValidationError", "ValidationError"):
                schemas.pop(name, None)
        return app.openapi_schema

    app.openapi = openapi
    return app
