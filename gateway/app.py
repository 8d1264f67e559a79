"""The HTTP gateway: JSON over HTTP for services that do not use the Python SDK.

Operations turn requests into command records on ``{ns}.commands`` and wait for the engine's
reply; reads come from the engine and Kafka (a Redis read model can be put behind the
read-your-writes hook, ``GatewayConfig.read_your_writes``). Every ``/v1`` request passes the guard
first (API key, namespace, quota: ``guard.py``); errors are typed (``errors.py``, answered by
``error_handlers.py``). The routes live in ``routes/``, one router per kind; what they share is
the ``GatewayContext`` (``context.py``) this module builds.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI
from prometheus_client import CollectorRegistry, Counter, Histogram

from kadence.storage import open_large_payloads, open_store
from kadence.topics.codec_metrics import register_codec_metrics
from kadence.topics.eager_start import EagerStarter
from kadence.topics.engine_client import EngineClient
from kadence.topics.errors import KadenceError
from kadence.topics.payload import JsonConverter

from . import error_handlers
from .config import GatewayConfig
from .console import mount_console
from .context import GatewayContext
from .engines import EnginePool
from .guard import Guard
from .idempotency import IdempotencyStore
from .keys import ApiKeyStore
from .limits import RateLimiter
from .middleware import BodyLimits, EncodedSlashes, GuardRequests, Observe, TraceContext
from .redis_breaker import RedisBreaker, guarded_redis
from .routes import activities, health, operations, queues, schedules, standalone, streams, workflows
from .routes.params import documented

__all__ = ["create_app"]

log = logging.getLogger(__name__)


def create_app(
    config: GatewayConfig, *, engine: EngineClient | None = None, eager_starters: Iterable[EagerStarter] = ()
) -> FastAPI:
    """The gateway app. ``engine``: an already connected client for ``config.kafka.namespace``
    (tests); otherwise one is created per namespace on first use. ``eager_starters``: workers
    running in this process (``kadence.sdk.Worker``) that may run the first workflow task of a
    start that asks for it (``request_eager_start``), in the namespace each serves."""
    converter = JsonConverter(config.codec, large=open_large_payloads(config.large_payloads))
    pool = EnginePool(config.kafka, preset={config.kafka.namespace: engine} if engine else None)
    redis = _redis(config)
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
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
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

    registry, requests_total, latency = _metrics()

    # plain ASGI middleware (gateway/middleware.py); the last added runs first -> observe, trace
    # context, guard, body limits, encoded slashes, then routing
    app.add_middleware(EncodedSlashes)
    app.add_middleware(BodyLimits, max_body_bytes=config.max_body_bytes)
    app.add_middleware(GuardRequests, guard=guard)
    app.add_middleware(TraceContext)
    app.add_middleware(Observe, requests_total=requests_total, latency=latency)

    app.state.gateway = GatewayContext(
        config=config,
        converter=converter,
        pool=pool,
        guard=guard,
        redis=redis,
        archive=archive,
        idempotency=idempotency,
        registry=registry,
        eager_starters=tuple(eager_starters),
    )
    error_handlers.install(app, config)
    for router in (
        workflows.router,
        streams.router,
        operations.router,
        activities.router,
        standalone.router,
        queues.router,
        schedules.router,
    ):
        app.include_router(router, dependencies=[Depends(documented)])
    mount_console(app, guard, auth=config.auth)
    app.include_router(health.router)

    # FastAPI's documented way to change the document
    app.openapi = functools.partial(_openapi_without_validation_errors, app)  # type: ignore[method-assign]
    return app


def _redis(config: GatewayConfig) -> Any:
    """The gateway's Redis client (API keys, rate limits, idempotency), or None without one."""
    if not config.redis_url:
        return None
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    # no client-side retries, and no calls while Redis is known down (``redis_breaker``):
    # a Redis outage must become a prompt 503, not a slow one
    return guarded_redis(
        config.redis_url,
        RedisBreaker(config.redis_fail_fast_seconds),
        socket_timeout=2,
        socket_connect_timeout=1,
        retry=Retry(NoBackoff(), 0),
    )


def _metrics() -> tuple[CollectorRegistry, Counter, Histogram]:
    """The gateway's own registry (with the codecs' metrics), its request counter and latency."""
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
    return registry, requests_total, latency


def _openapi_without_validation_errors(app: FastAPI) -> dict[str, Any]:
    """``app``'s OpenAPI document without FastAPI's own 422 (HTTPValidationError), which it
    documents for every operation with parameters: this gateway answers invalid input with a
    400 ErrorResponse, and its only 422 is idempotency_key_reused (an ErrorResponse)."""
    if app.openapi_schema is None:
        spec = FastAPI.openapi(app)
        for path_item in spec.get("paths", {}).values():
            for operation in path_item.values():
                responses = operation.get("responses", {})
                if "HTTPValidationError" in json.dumps(responses.get("422", {})):
                    responses.pop("422")
        schemas = spec.get("components", {}).get("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        app.openapi_schema = spec
    return app.openapi_schema
