"""What the gateway's routes declare alike: validated path parameters, the shared headers and
query parameters, and the error responses each kind of operation documents."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import Header, Path, Query, Security
from fastapi.security import HTTPBearer

from kadence.topics.config import NAMESPACE_RE

from ..consistency import TOKEN_HEADER
from ..errors import ErrorResponse
from ..guard import NAMESPACE_HEADER
from ..models import NameParam, WorkflowIdInPath

__all__ = [
    "IDEMPOTENCY_KEY",
    "KEYED_IDS",
    "READ",
    "TOKEN_DOC",
    "TOKEN_HEADER_PARAM",
    "TOKEN_QUERY",
    "WRITE",
    "QueryPath",
    "Responses",
    "TypePath",
    "UpdatePath",
    "WorkflowIdPath",
    "documented",
    "ms",
]

# validated path parameters (in Annotated, so that their validators run; module level, so that
# FastAPI resolves them under `from __future__ import annotations`)
WorkflowIdPath = Annotated[WorkflowIdInPath, Path(description="the workflow ID; a / in it is sent encoded, as %2F")]
TypePath = Annotated[NameParam, Path(description="the workflow type")]
QueryPath = Annotated[NameParam, Path(description="the query's name")]
UpdatePath = Annotated[NameParam, Path(description="the update's name")]

#: a workflow ID derived from an Idempotency-Key: a retried start without workflow_id starts nothing new
KEYED_IDS = uuid.UUID("6b1d3c3e-95c2-4c55-9a53-3f1f0cbe2a61")


def ms(seconds: float | None) -> int | None:
    return None if seconds is None else max(1, int(seconds * 1000))


#: FastAPI's ``responses=``: status -> what the OpenAPI document says of it
Responses = dict[int | str, dict[str, Any]]


def _responses(*statuses: int) -> Responses:
    return {s: {"model": ErrorResponse} for s in statuses}


_COMMON = (400, 401, 403, 404, 413, 415, 429, 503)
READ = _responses(*_COMMON)
WRITE = _responses(*_COMMON, 409, 422)
TOKEN_DOC: dict[str, Any] = {
    "headers": {
        TOKEN_HEADER: {
            "description": "opaque consistency token: pass it to a later read (header or ?consistency_token=) "
            "to read at least this change",
            "schema": {"type": "string"},
        }
    }
}

_bearer = HTTPBearer(auto_error=False, description="an API key from `kadence keys create` (not with --no-auth)")


async def documented(
    _credentials: Any = Security(_bearer),
    _namespace: str | None = Header(
        None,
        alias=NAMESPACE_HEADER,
        pattern=NAMESPACE_RE.pattern,
        description="the namespace to act in; default: the API key's",
    ),
) -> None:
    """Puts the API key and the namespace header in the OpenAPI document; the guard middleware has
    already checked both before routing. ``async``: a plain ``def`` dependency would run in a
    worker thread on every request."""


IDEMPOTENCY_KEY = Header(
    None,
    min_length=1,
    max_length=200,
    description="the command's request ID: a retry with the same key gets the first "
    "answer; reusing it for another request is a 422",
)
TOKEN_QUERY = Query(None, max_length=2048, description=f"a {TOKEN_HEADER} from an earlier response")
TOKEN_HEADER_PARAM = Header(
    None,
    alias=TOKEN_HEADER,
    max_length=2048,
    description="a consistency token from an earlier response (same as the query parameter)",
)
