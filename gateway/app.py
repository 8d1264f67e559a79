"""The HTTP gateway: JSON over HTTP for services that do not use the Python SDK.

Operations turn requests into command records on ``{ns}.commands`` and wait for the engine's
reply; reads come from Kafka (the Redis read model replaces the history scan when it exists).
Errors are ``{"error": {"code", "message", "field"?}}`` with a stable code, never a stack trace.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import os
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from kadence.topics.config import KafkaConfig
from kadence.topics.engine_client import EngineClient
from kadence.topics.errors import BrokerUnavailableError, KadenceError, WorkflowNotFoundError
from kadence.topics.history_json import event_to_json
from kadence.topics.payload import JsonConverter

__all__ = ["GatewayConfig", "create_app"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class GatewayConfig:
    kafka: KafkaConfig
    #: KADENCE_GATEWAY_REPLY_TIMEOUT: seconds to wait for the engine's reply before a 503
    reply_timeout: float = 15.0
    #: KADENCE_GATEWAY_MAX_BODY: largest accepted request body in bytes
    max_body_bytes: int = 2 * 1024 * 1024
    #: KADENCE_REDIS_URL: checked by /readyz when set
    redis_url: str | None = None
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_env(cls, kafka: KafkaConfig, env=None) -> "GatewayConfig":
        env = os.environ if env is None else env
        kw: dict = {}
        if env.get("KADENCE_GATEWAY_REPLY_TIMEOUT"):
            kw["reply_timeout"] = float(env["KADENCE_GATEWAY_REPLY_TIMEOUT"])
        if env.get("KADENCE_GATEWAY_MAX_BODY"):
            kw["max_body_bytes"] = int(env["KADENCE_GATEWAY_MAX_BODY"])
        if env.get("KADENCE_REDIS_URL"):
            kw["redis_url"] = env["KADENCE_REDIS_URL"]
        return cls(kafka=kafka, **kw)


class StartRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    workflow_id: str | None = Field(None, min_length=1, max_length=512,
                                    description="defaults to a generated UUID")
    task_queue: str = Field(..., min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._-]+$")
    input: list[Any] = Field(default_factory=list, description="the workflow's positional arguments")


class StartResponse(BaseModel):
    workflow_id: str
    run_id: str


class SignalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    signal: str = Field(..., min_length=1, max_length=200, description="the signal's name")
    input: list[Any] = Field(default_factory=list, description="the signal handler's arguments")
    workflow_type: str | None = Field(None, min_length=1, max_length=200,
                                      description="signal-with-start: start this type first if no run is open")
    task_queue: str | None = Field(None, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._-]+$",
                                   description="signal-with-start: the task queue of the run to start")
    start_input: list[Any] = Field(default_factory=list, description="signal-with-start: the workflow's arguments")


class ReasonRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field("", max_length=2000)


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input: list[Any] = Field(default_factory=list, description="the query handler's arguments")


class RunResponse(BaseModel):
    workflow_id: str
    run_id: str | None


class ErrorBody(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


def _error(status: int, code: str, message: str, field: str | None = None, headers=None) -> JSONResponse:
    body = {"code": code, "message": message}
    if field:
        body["field"] = field
    return JSONResponse({"error": body}, status_code=status, headers=headers)


_CLOSING = {"WorkflowExecutionCompleted", "WorkflowExecutionFailed", "WorkflowExecutionCanceled",
            "WorkflowExecutionTerminated", "WorkflowExecutionContinuedAsNew", "WorkflowExecutionTimedOut"}


def _encode_cursor(seq: int, run_id: str) -> str:
    """Opaque to clients: the last event seen and its run."""
    return base64.urlsafe_b64encode(json.dumps([seq, run_id]).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        seq, run_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(seq, int) or not isinstance(run_id, str) or seq < 0:
            raise ValueError("bad cursor")
        return seq, run_id
    except (ValueError, TypeError, binascii.Error) as exc:
        raise RequestValidationError([{"loc": ("query", "cursor"), "msg": "not a cursor from this API",
                                       "type": "value_error"}]) from exc


_ERRORS = {400: {"model": ErrorResponse}, 404: {"model": ErrorResponse}, 409: {"model": ErrorResponse},
           413: {"model": ErrorResponse}, 415: {"model": ErrorResponse},
           503: {"model": ErrorResponse}}

#: stable codes of the HTTP errors that routing and body parsing raise before an operation runs
_HTTP_CODES = {400: "invalid_input", 404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}


def create_app(config: GatewayConfig, *, engine: EngineClient | None = None) -> FastAPI:
    converter = JsonConverter()
    state: dict = {"engine": engine}

    @asynccontextmanager
    async def lifespan(_app):
        if state["engine"] is None:
            state["engine"] = await asyncio.get_running_loop().run_in_executor(None, EngineClient, config.kafka)
            owned = True
        else:
            owned = False
        yield
        if owned:
            await asyncio.get_running_loop().run_in_executor(None, state["engine"].close)

    app = FastAPI(title="Kadence gateway", version="0.1.0", lifespan=lifespan,
                  description="Start workflows and read their history over HTTP.")

    registry = CollectorRegistry()
    requests_total = Counter("kadence_gateway_requests", "HTTP requests", ["method", "route", "status"],
                             registry=registry)
    latency = Histogram("kadence_gateway_request_seconds", "HTTP request latency", ["route"], registry=registry,
                        buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 15, 30))

    @app.middleware("http")
    async def observe(request: Request, call_next):
        t0 = time.perf_counter()
        response = await call_next(request)
        route = getattr(request.scope.get("route"), "path", "unmatched")
        requests_total.labels(request.method, route, str(response.status_code)).inc()
        latency.labels(route).observe(time.perf_counter() - t0)
        return response

    @app.middleware("http")
    async def body_limits(request: Request, call_next):
        """413 over the size limit and 415 for a body that is not JSON, before anything is parsed
        or produced (a rejected request changes nothing)."""
        if request.method in ("POST", "PUT", "PATCH"):
            declared = request.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > config.max_body_bytes:
                return _error(413, "payload_too_large", f"request body over {config.max_body_bytes} bytes")
            body = await request.body()
            if len(body) > config.max_body_bytes:
                return _error(413, "payload_too_large", f"request body over {config.max_body_bytes} bytes")
            ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if body and ctype != "application/json" and not ctype.endswith("+json"):
                return _error(415, "unsupported_media_type",
                              f"send JSON with Content-Type: application/json (got {ctype or 'none'})")
        return await call_next(request)

    @app.exception_handler(RequestValidationError)
    async def on_invalid(_request: Request, exc: RequestValidationError):
        err = exc.errors()[0] if exc.errors() else {}
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body",)]
        if err.get("type") == "json_invalid":
            return _error(400, "invalid_json", "request body is not valid JSON")
        field_name = ".".join(loc) or None
        return _error(400, "invalid_input", f"{field_name or 'body'}: {err.get('msg', 'invalid')}", field_name)

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(_request: Request, exc: StarletteHTTPException):
        # unknown routes, wrong methods, bodies that cannot be parsed: same error shape as the rest
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        return _error(exc.status_code, code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(BrokerUnavailableError)
    async def on_unavailable(_request: Request, exc: BrokerUnavailableError):
        return _error(503, "unavailable", str(exc), headers={"Retry-After": "5"})

    @app.exception_handler(WorkflowNotFoundError)
    async def on_not_found(_request: Request, exc: WorkflowNotFoundError):
        return _error(404, "not_found", str(exc))

    @app.exception_handler(KadenceError)
    async def on_kadence(_request: Request, exc: KadenceError):
        return _error(400, "invalid_input", str(exc))

    @app.post("/v1/workflows/{workflow_type}/start", status_code=201, response_model=StartResponse,
              responses=_ERRORS, summary="Start a workflow run")
    async def start(workflow_type: str, body: StartRequest,
                    idempotency_key: str | None = Header(None, max_length=200,
                                                         description="retries with the same key get the first answer")):
        engine: EngineClient = state["engine"]
        workflow_id = body.workflow_id or str(uuid.uuid4())
        request_id = idempotency_key or str(uuid.uuid4())
        payload = {
            "workflow_type": workflow_type, "task_queue": body.task_queue,
            "input": converter.to_bytes(body.input), "id_reuse_policy": "allow_duplicate",
            "run_timeout_ms": None, "search_attributes": {},
        }
        reply = await engine.request(workflow_id, "StartWorkflow", payload, request_id=request_id,
                                     timeout=config.reply_timeout)
        if reply["status"] == "already_started":
            return JSONResponse({"error": {"code": "already_started", "message": reply["message"],
                                           "run_id": reply["run_id"]}}, status_code=409)
        if reply["status"] != "ok":
            return _error(400, reply["status"], reply["message"])
        log.info("started workflow %s run %s", workflow_id, reply["run_id"])
        return StartResponse(workflow_id=workflow_id, run_id=reply["run_id"])

    @app.get("/v1/workflows/{workflow_id}/history", responses=_ERRORS,
             summary="A run's history, oldest first, in pages; optionally waits for new events")
    async def history(workflow_id: str, run_id: str | None = None,
                      page_size: int = Query(1000, ge=1, le=10_000, description="most events in one page"),
                      cursor: str | None = Query(None, max_length=200, description="next_cursor of the previous page"),
                      wait_seconds: float = Query(0, ge=0, le=60,
                                                  description="long-poll: wait up to this long for events past the cursor")):
        engine: EngineClient = state["engine"]
        after = 0
        if cursor is not None:
            after, cursor_run = _decode_cursor(cursor)
            run_id = run_id or cursor_run
            if cursor_run != run_id:
                return _error(400, "invalid_input", "cursor belongs to another run", "cursor")
        deadline = time.monotonic() + wait_seconds
        while True:
            rid, events = await engine.history(workflow_id, run_id)
            if run_id is not None and not events:
                raise WorkflowNotFoundError(f"run {run_id!r} of workflow {workflow_id!r} not found")
            page = [e for e in events if e["seq"] > after][:page_size]
            closed = bool(events) and events[-1]["attributes"][0] in _CLOSING
            if page or closed or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.2)
        last = page[-1]["seq"] if page else after
        more = any(e["seq"] > last for e in events)
        return {"workflow_id": workflow_id, "run_id": rid, "events": [event_to_json(e, converter) for e in page],
                "next_cursor": _encode_cursor(last, rid), "has_more": more, "closed": closed}

    async def _mutation(workflow_id: str, body_type: str, body: dict, idempotency_key: str | None):
        engine: EngineClient = state["engine"]
        reply = await engine.request(workflow_id, body_type, body, request_id=idempotency_key or str(uuid.uuid4()),
                                     timeout=config.reply_timeout)
        if reply["status"] == "not_found":
            raise WorkflowNotFoundError(reply["message"] or f"workflow {workflow_id!r} not found")
        if reply["status"] != "ok":
            return _error(409, "not_running", reply["message"] or reply["status"])
        return RunResponse(workflow_id=workflow_id, run_id=reply["run_id"])

    _KEY = Header(None, max_length=200, description="retries with the same key get the first answer")

    @app.post("/v1/workflows/{workflow_id}/signals", response_model=RunResponse, responses=_ERRORS,
              summary="Signal a workflow (signal-with-start when workflow_type and task_queue are given)")
    async def signal(workflow_id: str, body: SignalRequest, idempotency_key: str | None = _KEY):
        start = None
        if body.workflow_type or body.task_queue:
            if not (body.workflow_type and body.task_queue):
                return _error(400, "invalid_input", "signal-with-start needs both workflow_type and task_queue",
                              "workflow_type" if not body.workflow_type else "task_queue")
            start = {"workflow_type": body.workflow_type, "task_queue": body.task_queue,
                     "input": converter.to_bytes(body.start_input), "id_reuse_policy": "allow_duplicate",
                     "run_timeout_ms": None, "search_attributes": {}}
        return await _mutation(workflow_id, "SignalWorkflow", {
            "signal_name": body.signal, "input": converter.to_bytes(body.input), "start": start,
            "identity": "gateway"}, idempotency_key)

    @app.post("/v1/workflows/{workflow_id}/cancel", response_model=RunResponse, responses=_ERRORS,
              summary="Request cooperative cancellation (idempotent)")
    async def cancel(workflow_id: str, body: ReasonRequest | None = None, idempotency_key: str | None = _KEY):
        return await _mutation(workflow_id, "RequestCancelWorkflow", {"reason": body.reason if body else ""},
                               idempotency_key)

    @app.post("/v1/workflows/{workflow_id}/terminate", response_model=RunResponse, responses=_ERRORS,
              summary="End the run at once")
    async def terminate(workflow_id: str, body: ReasonRequest | None = None, idempotency_key: str | None = _KEY):
        log.warning("audit: terminate of workflow %s requested through the gateway", workflow_id)
        return await _mutation(workflow_id, "TerminateWorkflow",
                               {"reason": body.reason if body else "", "identity": "gateway"}, idempotency_key)

    @app.post("/v1/workflows/{workflow_id}/queries/{query_name}", responses=_ERRORS,
              summary="Ask a running workflow's query handler (nothing is written to history)")
    async def query(workflow_id: str, query_name: str, body: QueryRequest | None = None):
        engine: EngineClient = state["engine"]
        reply = await engine.request(workflow_id, "QueryWorkflow", {
            "query_name": query_name, "input": converter.to_bytes(body.input if body else [])},
            request_id=str(uuid.uuid4()), timeout=config.reply_timeout)
        if reply["status"] == "not_found":
            raise WorkflowNotFoundError(reply["message"])
        if reply["status"] != "ok":
            return _error(409 if reply["status"] == "rejected" else 400, "query_failed", reply["message"])
        return {"workflow_id": workflow_id, "run_id": reply["run_id"], "result": converter.from_bytes(reply["result"])}

    @app.get("/v1/workflows/{workflow_id}", responses=_ERRORS, summary="Describe a workflow's current run")
    async def describe(workflow_id: str):
        engine: EngineClient = state["engine"]
        reply = await engine.request(workflow_id, "AwaitWorkflowResult", {"wait": False}, request_id=str(uuid.uuid4()),
                                     timeout=config.reply_timeout)
        if reply["status"] == "not_found":
            raise WorkflowNotFoundError(reply["message"])
        out = {"workflow_id": workflow_id, "run_id": reply["run_id"], "status": reply["status"]}
        if reply["status"] == "completed":
            out["result"] = converter.from_bytes(reply["result"])
        if reply["failure"]:
            f = reply["failure"]
            key = "last_task_failure" if reply["status"] == "running" else "failure"
            out[key] = {"type": f["type"], "message": f["message"], "cause": reply["message"] or None}
        return out

    @app.get("/readyz", summary="Readiness: the broker (and Redis, when configured) answer")
    async def readyz():
        checks: dict = {}
        engine: EngineClient | None = state["engine"]
        loop = asyncio.get_running_loop()
        try:
            if engine is None:
                raise BrokerUnavailableError("not connected yet")
            await asyncio.wait_for(loop.run_in_executor(None, engine.topics.existing), 5)
            checks["kafka"] = "ok"
        except (KadenceError, asyncio.TimeoutError) as exc:
            checks["kafka"] = f"unavailable: {exc or 'timeout'}"
        if config.redis_url:
            import redis.asyncio as aioredis  # only when configured

            client = aioredis.from_url(config.redis_url, socket_timeout=2, socket_connect_timeout=2)
            try:
                await client.ping()
                checks["redis"] = "ok"
            except Exception as exc:  # noqa: BLE001 - any failure means "not ready", with its reason
                checks["redis"] = f"unavailable: {type(exc).__name__}"
            finally:
                await client.aclose()
        ready = all(v == "ok" for v in checks.values())
        if ready:
            return {"status": "ready", "checks": checks}
        down = ", ".join(k for k, v in checks.items() if v != "ok")
        return JSONResponse({"status": "unavailable", "checks": checks,
                             "error": {"code": "unavailable", "message": f"not ready: {down}"}},
                            status_code=503, headers={"Retry-After": "5"})

    @app.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse)
    async def metrics():
        return PlainTextResponse(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz", summary="Liveness")
    async def healthz():
        return {"status": "ok"}

    def openapi() -> dict:
        # FastAPI documents a 422 for every operation with parameters; this gateway answers
        # invalid input with a 400 ErrorResponse instead, so the spec must not promise a 422
        if app.openapi_schema is None:
            spec = FastAPI.openapi(app)
            for operations in spec.get("paths", {}).values():
                for operation in operations.values():
                    operation.get("responses", {}).pop("422", None)
            schemas = spec.get("components", {}).get("schemas", {})
            for name in ("HTTPValidationError", "ValidationError"):
                schemas.pop(name, None)
        return app.openapi_schema

    app.openapi = openapi
    return app
