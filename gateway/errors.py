"""The gateway's error responses: ``{"error": {"code", "message", "field"?, ...}}``, a stable code per
case, never a stack trace.

    status  code                     when
    400     invalid_input            a field is wrong (``field`` names it)
    400     invalid_json             the body is not JSON
    401     unauthenticated          no API key, or not a valid one
    403     forbidden                the key's namespace is not the request's
    404     not_found                unknown workflow, run or route
    405     method_not_allowed
    409     already_started          the workflow ID has an open run (``run_id`` names it)
    409     not_running              the run is closed (cancel, terminate, signal)
    409     query_rejected           the query could not be answered by the run
    409     activity_not_current     an async activity completion for an attempt that had ended
    413     payload_too_large
    415     unsupported_media_type
    422     idempotency_key_reused   the Idempotency-Key was first used for another request
    429     rate_limited             over a namespace or key quota (Retry-After)
    503     unavailable              Kafka, the engine or Redis did not answer (Retry-After)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from kadence.topics.errors import WorkflowNotFoundError
from kadence.topics.protocol import refusal

__all__ = ["ApiError", "ErrorBody", "ErrorResponse", "error_response", "refused_response"]


class ApiError(Exception):
    """Raised anywhere in a request: becomes the error response, nothing else happens."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        headers: dict[str, Any] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field
        self.headers, self.extra = headers, extra

    def response(self) -> JSONResponse:
        return error_response(self.status, self.code, self.message, self.field, self.headers, **self.extra)


class ErrorBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    code: str
    message: str
    field: str | None = None
    run_id: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


def error_response(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    body = {"code": code, "message": message}
    if field:
        body["field"] = field
    body.update(extra)
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def refused_response(
    reply: Mapping[str, Any], workflow_id: str, code: str, headers: Mapping[str, str] | None = None, **extra: Any
) -> JSONResponse | None:
    """None when the engine applied the command; else, read by ``topics.protocol.refusal``:
    ``WorkflowNotFoundError`` raised (the 404 handler answers it), or a 409 ``code`` response with
    the engine's own words (``run_id`` and the like in ``extra``)."""
    refused = refusal(reply, workflow_id, what=code)
    if refused is None:
        return None
    if isinstance(refused, WorkflowNotFoundError):
        raise refused
    return error_response(409, code, refused.engine_message, headers=headers, **extra)
