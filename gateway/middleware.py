"""The gateway's request filters as plain ASGI middleware: observe -> trace context -> guard ->
body limits -> encoded slashes.

Plain ASGI (not Starlette's ``BaseHTTPMiddleware``): each ``BaseHTTPMiddleware`` layer runs the
rest of the request in a new task with its own task group and memory streams, which cost the
gateway more CPU per request than the route itself (docs/performance.md, "Gateway"). These
classes only wrap ``receive``/``send``.

- ``Observe`` (outermost): counts requests by method, route template and status, and their latency.
- ``TraceContext``: a W3C ``traceparent`` header makes the caller's span the current one, so the
  commands the request sends continue the caller's trace (docs/tracing.md).
- ``GuardRequests``: API key, namespace and quota of every ``/v1`` request (``guard.Guard``),
  before its body is read; puts the ``Principal`` in ``scope["kadence.principal"]``.
- ``BodyLimits``: 413 over the size limit and 415 for a body that is not JSON, before anything is
  parsed or produced (a rejected request changes nothing); the body read here is replayed to
  the route.
- ``EncodedSlashes`` (innermost): a workflow ID may hold ``/`` (children are ``parent/child-N``);
  the server decodes ``%2F`` before routing, so ``/v1/workflows/a%2Fb/history`` would not match
  ``/workflows/{workflow_id}/history``. An encoded slash is routed as ``SLASH`` (a NUL, which no
  valid identifier holds) and the workflow-ID parameters turn it back into ``/``.
"""

from __future__ import annotations

import re
import time
from urllib.parse import unquote

from opentelemetry import context as otel_context
from opentelemetry import propagate
from prometheus_client import Counter, Histogram
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import ApiError, error_response
from .guard import Guard

__all__ = ["SLASH", "BodyLimits", "EncodedSlashes", "GuardRequests", "Observe", "TraceContext"]

#: what an encoded slash (``%2F``) in a request path is routed as; see ``EncodedSlashes``
SLASH = "\x00"

#: the requests that change nothing although they are not GET/HEAD: a query runs a read-only
#: handler (nothing is written to history); decoding payloads reads nothing but the request.
#: Every other POST, PUT, PATCH or DELETE under /v1 is a mutation (503 when Redis is down,
#: quota, Idempotency-Key): a route added later is guarded until it is declared here, and a test
#: checks every route of the served app (issue 16).
READ_ONLY_POSTS = (re.compile(r"^/v1/workflows/[^/]+/queries/[^/]+$"), re.compile(r"^/v1/codec/decode$"))
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def is_mutation(method: str, path: str) -> bool:
    """Does this request change something? Decided from the method and the raw path, never from
    what the router makes of them (so it cannot fail open when routing changes)."""
    if method.upper() in _SAFE_METHODS:
        return False
    return not (method.upper() == "POST" and any(p.match(path) for p in READ_ONLY_POSTS))


class Observe:
    def __init__(self, app: ASGIApp, *, requests_total: Counter, latency: Histogram) -> None:
        self.app, self.requests_total, self.latency = app, requests_total, latency

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        status = 500  # what the client gets when the app raises before answering

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            self.requests_total.labels(scope["method"], route, str(status)).inc()
            self.latency.labels(route).observe(time.perf_counter() - t0)


class TraceContext:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        carrier = {
            k.decode("latin-1"): v.decode("latin-1")
            for k, v in scope["headers"]
            if k in (b"traceparent", b"tracestate")
        }
        if "traceparent" not in carrier:  # most requests: nothing to do
            return await self.app(scope, receive, send)
        token = otel_context.attach(propagate.extract(carrier))
        try:
            await self.app(scope, receive, send)
        finally:
            otel_context.detach(token)


class GuardRequests:
    def __init__(self, app: ASGIApp, *, guard: Guard) -> None:
        self.app, self.guard = app, guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            return await self.app(scope, receive, send)
        mutation = is_mutation(
            scope["method"], scope.get("raw_path", b"").decode("latin-1").split("?", 1)[0] or scope["path"]
        )
        try:
            scope["kadence.principal"] = await self.guard.admit(Headers(scope=scope), mutation=mutation)
        except ApiError as exc:
            return await exc.response()(scope, receive, send)
        await self.app(scope, receive, send)


class BodyLimits:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app, self.max_body_bytes = app, max_body_bytes

    def _too_large(self) -> JSONResponse:
        return error_response(413, "payload_too_large", f"request body over {self.max_body_bytes} bytes")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        headers = Headers(scope=scope)
        declared = headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > self.max_body_bytes:
            return await self._too_large()(scope, receive, send)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client is gone: nothing to answer, nothing produced
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return await self._too_large()(scope, receive, send)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        ctype = headers.get("content-type", "").split(";")[0].strip().lower()
        # the API takes JSON; the console's pages (/ui) post HTML forms
        form = scope["path"].startswith("/ui/") and ctype == "application/x-www-form-urlencoded"
        if body and ctype != "application/json" and not ctype.endswith("+json") and not form:
            return await error_response(
                415, "unsupported_media_type", f"send JSON with Content-Type: application/json (got {ctype or 'none'})"
            )(scope, receive, send)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: wait for the disconnect as usual

        await self.app(scope, replay, send)


class EncodedSlashes:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if raw:
            path = raw.split(b"?", 1)[0]
            if b"%00" in path:  # a NUL would be taken for an encoded slash: no identifier holds one
                return await error_response(400, "invalid_input", "the request path contains a NUL (%00)", "path")(
                    scope, receive, send
                )
            if b"%2F" in path or b"%2f" in path:
                text = path.decode("latin-1").replace("%2F", "%00").replace("%2f", "%00")
                scope = {**scope, "path": unquote(text)}  # %00, that is SLASH
        await self.app(scope, receive, send)
