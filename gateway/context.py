"""What every route of the gateway uses, made once by ``create_app``: the configuration, the
payload converter, the engine clients per namespace, Redis, the archive, the idempotency store,
and the steps operations share (claim an Idempotency-Key, send a command and wait for its reply,
honour a consistency token). Routes reach it through the ``Gateway`` dependency."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse
from redis.exceptions import RedisError
from starlette.concurrency import run_in_threadpool

from kadence.readmodels.visibility import VisibilityReader
from kadence.schemas.records import StartWorkflow
from kadence.topics.config import KafkaConfig
from kadence.topics.eager_start import EagerStarter, eager_body, settle
from kadence.topics.errors import BrokerUnavailableError
from kadence.topics.payload import JsonConverter
from kadence.topics.protocol import result_body
from kadence.topics.records import new_id

from .config import GatewayConfig
from .consistency import TOKEN_HEADER, ConsistencyToken
from .engines import EnginePool
from .errors import ApiError, refused_response
from .guard import Guard, Principal
from .idempotency import IdempotencyStore, fingerprint
from .models import RunResponse, StartResponse
from .stream_values import RenderedValues

__all__ = ["Gateway", "GatewayContext", "gateway", "mutation_result", "principal"]


@dataclass(eq=False)
class GatewayContext:
    config: GatewayConfig
    converter: JsonConverter
    pool: EnginePool
    guard: Guard
    #: None: no Redis configured (no API keys, quotas, idempotency keys or listing)
    redis: Any = None
    #: the archive's store (reads of archived runs), when configured
    archive: Any = None
    idempotency: IdempotencyStore | None = None
    #: the gateway's Prometheus registry (``/metrics``)
    registry: Any = None
    #: in-process workers that may run the first workflow task of a start asking for it
    #: (``request_eager_start``; ``topics.eager_start``)
    eager_starters: tuple[EagerStarter, ...] = ()
    #: stream values rendered for Server-Sent Events, shared by this gateway's readers
    rendered: RenderedValues = field(default_factory=RenderedValues)

    def retry_after(self) -> dict[str, Any]:
        return {"Retry-After": str(self.config.retry_after_seconds)}

    def visibility(self, namespace: str) -> VisibilityReader:
        """The visibility projection of ``namespace``; a 503 when the gateway runs without Redis."""
        if self.redis is None:
            raise ApiError(
                503,
                "unavailable",
                "listing needs Redis (the visibility projection); start the gateway with KADENCE_REDIS_URL",
                headers=self.retry_after(),
            )
        return VisibilityReader(self.redis, namespace)

    def namespace_config(self, who: Principal) -> KafkaConfig:
        return dataclasses.replace(self.config.kafka, namespace=who.namespace)

    async def claim_key(self, request: Request, who: Principal, key: str | None) -> None:
        """422 when ``key`` was first used for another request (checked on every instance)."""
        if key is None or self.idempotency is None:
            return
        body = await request.body()
        try:
            same = await self.idempotency.claim(who.namespace, key, fingerprint(request.method, request.url.path, body))
        except (RedisError, OSError) as exc:
            raise ApiError(
                503, "unavailable", "Redis (idempotency keys) did not answer; retry later", headers=self.retry_after()
            ) from exc
        if not same:
            raise ApiError(
                422,
                "idempotency_key_reused",
                "this Idempotency-Key was first used for a different request (method, path or body)",
                field="Idempotency-Key",
            )

    async def command(
        self,
        request: Request,
        who: Principal,
        workflow_id: str,
        body_type: str,
        payload: Mapping[str, Any],
        key: str | None,
        *,
        claimed: bool = False,
        request_id: str | None = None,
        event_id: str | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Produce one command (after the idempotency check, unless the caller ``claimed`` the
        key already) and wait for its reply; returns the reply and the response headers (the
        consistency token). ``request_id``: default the key, or a new one."""
        if not claimed:
            await self.claim_key(request, who, key)
        engine = await self.pool.get(who.namespace)
        reply = await engine.request(
            workflow_id,
            body_type,
            payload,
            request_id=request_id or key or str(uuid.uuid4()),
            timeout=self.config.reply_timeout,
            event_id=event_id,
        )
        headers = {}
        if reply.get("history_seq") is not None and reply.get("run_id"):
            headers[TOKEN_HEADER] = ConsistencyToken(
                who.namespace, workflow_id, reply["run_id"], reply["history_seq"]
            ).encode()
        return reply, headers

    async def start(
        self,
        request: Request,
        who: Principal,
        workflow_id: str,
        payload: StartWorkflow,
        key: str | None,
        *,
        eager: bool,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """``command`` for a start; with ``eager``, the run's first workflow task is run first by
        an in-process worker that serves it (``topics.eager_start``), if there is one."""
        if not (eager and self.eager_starters):
            return await self.command(request, who, workflow_id, "StartWorkflow", payload, key)
        # the key is claimed before the task runs: a request refused for its key runs nothing
        await self.claim_key(request, who, key)
        request_id, event_id = key or str(uuid.uuid4()), new_id()
        payload, starter = await eager_body(
            self.eager_starters, who.namespace, workflow_id, payload, request_id, event_id
        )
        reply, headers = await self.command(
            request,
            who,
            workflow_id,
            "StartWorkflow",
            payload,
            key,
            claimed=True,
            request_id=request_id,
            event_id=event_id,
        )
        settle(starter, workflow_id, event_id, reply)
        return reply, headers

    async def consistent_read(
        self, who: Principal, workflow_id: str, query_token: str | None, header_token: str | None
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
        await self.config.read_your_writes(who.namespace, token)

    async def encoded(self, request: Request, value: Any) -> bytes:
        """``value`` as payload bytes; a body over the large-payload threshold is encoded (and
        stored) on a worker thread, so the event loop does not wait for the store."""
        if int(request.headers.get("content-length") or 0) > self.converter.large.threshold:
            return await run_in_threadpool(self.converter.to_bytes, value)
        return self.converter.to_bytes(value)

    async def wait_for_result(
        self, who: Principal, workflow_id: str, run_id: str, seconds: float, out: StartResponse
    ) -> None:
        """Fill ``out`` with the run's outcome if it closes within ``seconds`` (else status running)."""
        engine = await self.pool.get(who.namespace)
        try:
            reply = await engine.request(
                workflow_id,
                "AwaitWorkflowResult",
                result_body(wait=True),
                run_id=run_id,
                request_id=str(uuid.uuid4()),
                timeout=seconds,
            )
        except BrokerUnavailableError:  # the deadline passed (or the engine is slow): still running
            out.status = "running"
            return
        out.status = reply["status"]
        if reply["status"] == "completed":
            out.result = self.converter.from_bytes(reply["result"])
        elif reply["failure"]:
            out.failure = {"type": reply["failure"]["type"], "message": reply["failure"]["message"]}


async def gateway(request: Request) -> GatewayContext:
    """The app's context (``async``: a plain ``def`` dependency would run in a worker thread)."""
    context: GatewayContext = request.app.state.gateway
    return context


#: a route's parameter ``gw: Gateway`` receives the app's ``GatewayContext``
Gateway = Annotated[GatewayContext, Depends(gateway)]


def principal(request: Request) -> Principal:
    """Who sent the request (the guard middleware put it in the scope before routing)."""
    who: Principal = request.scope["kadence.principal"]
    return who


def mutation_result(reply: dict[str, Any], workflow_id: str, headers: dict[str, Any]) -> JSONResponse:
    refused = refused_response(reply, workflow_id, "not_running", headers=headers)
    if refused is not None:
        return refused
    return JSONResponse(RunResponse(workflow_id=workflow_id, run_id=reply["run_id"]).model_dump(), headers=headers)
