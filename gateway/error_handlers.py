"""The gateway's answers to errors: every exception an operation can raise becomes the error
shape of ``errors.py`` with a stable code and status (``install``: once, by ``create_app``)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import RedisError
from starlette.exceptions import HTTPException as StarletteHTTPException

from kadence.topics.errors import (
    ArchiveError,
    BrokerUnavailableError,
    KadenceError,
    NoReplyError,
    PayloadTooLargeError,
    WorkflowNotFoundError,
    WorkflowQuarantinedError,
)

from .config import GatewayConfig
from .engines import NamespaceUnavailable
from .errors import ApiError, error_response

__all__ = ["install"]

log = logging.getLogger(__name__)

#: stable codes of the HTTP errors that routing and body parsing raise before an operation runs
_HTTP_CODES = {400: "invalid_input", 404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}


async def _on_api_error(_request: Request, exc: ApiError) -> JSONResponse:
    return exc.response()


async def _on_invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
    err = exc.errors()[0] if exc.errors() else {}
    loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "path")]
    if err.get("type") == "json_invalid":
        return error_response(400, "invalid_json", "request body is not valid JSON")
    field_name = ".".join(loc) or None
    return error_response(400, "invalid_input", f"{field_name or 'body'}: {err.get('msg', 'invalid')}", field_name)


async def _on_http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
    # unknown routes, wrong methods, bodies that cannot be parsed: same error shape as the rest
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    return error_response(exc.status_code, code, str(exc.detail), headers=getattr(exc, "headers", None))


async def _on_quarantined(_request: Request, exc: WorkflowQuarantinedError) -> JSONResponse:
    # nothing was applied; the command waits in the dead-letter topic for an operator
    return error_response(503, "quarantined", str(exc))


async def _on_not_found(_request: Request, exc: WorkflowNotFoundError) -> JSONResponse:
    return error_response(404, "not_found", str(exc))


async def _on_kadence(_request: Request, exc: KadenceError) -> JSONResponse:
    return error_response(400, "invalid_input", str(exc))


async def _on_bug(request: Request, exc: Exception) -> JSONResponse:
    # the trace goes to the gateway's log, never to the client
    log.error(
        "unexpected error in %s %s",
        request.method,
        request.scope.get("route") and request.scope["route"].path,
        exc_info=exc,
    )
    return error_response(500, "internal_error", "unexpected error (logged by the gateway)")


def install(app: FastAPI, config: GatewayConfig) -> None:
    """Register the handlers on ``app``."""
    retry_after = {"Retry-After": str(config.retry_after_seconds)}

    async def on_unavailable(_request: Request, exc: Exception) -> JSONResponse:
        # the broker, a namespace, the payload store or the archive did not answer: retry later,
        # nothing was sent
        return error_response(503, "unavailable", str(exc), headers=retry_after)

    async def on_no_reply(_request: Request, exc: NoReplyError) -> JSONResponse:
        # Kafka took the command and no history processor answered in time: the command stands
        # and is applied when a processor runs; sent again with the same Idempotency-Key, once
        return error_response(503, "no_reply", str(exc), headers=retry_after)

    async def on_payload_too_large(_request: Request, exc: PayloadTooLargeError) -> JSONResponse:
        return error_response(
            413,
            "payload_too_large",
            f"{exc} (the gateway accepts request bodies up to {config.max_body_bytes} bytes; "
            f"a command must also fit Kafka's limit of {exc.limit} bytes)",
        )

    async def on_redis_down(_request: Request, exc: RedisError) -> JSONResponse:
        log.warning("Redis unavailable: %s", type(exc).__name__)
        return error_response(503, "unavailable", "Redis did not answer; retry later", headers=retry_after)

    handlers: list[tuple[type[Exception], Any]] = [
        (ApiError, _on_api_error),
        (RequestValidationError, _on_invalid),
        (StarletteHTTPException, _on_http_error),
        (NoReplyError, on_no_reply),
        (BrokerUnavailableError, on_unavailable),
        (NamespaceUnavailable, on_unavailable),
        (WorkflowQuarantinedError, _on_quarantined),
        (WorkflowNotFoundError, _on_not_found),
        (ArchiveError, on_unavailable),
        (PayloadTooLargeError, on_payload_too_large),
        (KadenceError, _on_kadence),
        (RedisError, on_redis_down),
        (Exception, _on_bug),
    ]
    for exc_class, handler in handlers:
        app.add_exception_handler(exc_class, handler)
