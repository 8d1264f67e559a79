"""Routes for whoever runs the gateway, outside ``/v1`` and without an API key: readiness
(``/readyz``: the broker, and Redis when configured, answer), liveness and Prometheus metrics."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError

from kadence.readmodels.visibility import projection_lag
from kadence.topics.errors import KadenceError

from ..context import Gateway

__all__ = ["router"]

router = APIRouter()


@router.get("/readyz", summary="Readiness: the broker (and Redis, when configured) answer", response_model=None)
async def readyz(gw: Gateway) -> Any:
    checks: dict[str, Any] = {}
    try:
        engine = await asyncio.wait_for(gw.pool.get(gw.config.kafka.namespace), 10)
        await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(None, engine.topics.existing), 5)
        checks["kafka"] = "ok"
    except (TimeoutError, KadenceError) as exc:
        checks["kafka"] = f"unavailable: {exc or 'timeout'}"
    if gw.redis is not None:
        try:
            await gw.redis.ping()
            checks["redis"] = "ok"
        except (RedisError, OSError) as exc:
            checks["redis"] = f"unavailable: {type(exc).__name__}"
    ready = all(v == "ok" for v in checks.values())
    detail: dict[str, Any] = {}
    if gw.redis is not None and checks.get("redis") == "ok":
        try:  # informative: a lagging projection does not make the gateway unready
            detail["projections"] = await asyncio.wait_for(projection_lag(gw.redis, gw.config.kafka.namespace), 5)
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
        headers=gw.retry_after(),
    )


@router.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse, response_model=None)
async def metrics(gw: Gateway) -> Any:
    return PlainTextResponse(generate_latest(gw.registry), media_type=CONTENT_TYPE_LATEST)


@router.get("/healthz", summary="Liveness", response_model=None)
async def healthz() -> Any:
    return {"status": "ok"}
