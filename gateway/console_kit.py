"""What every page of the web console at ``/ui`` uses (``ConsoleKit``: the templates, the API
client, the sign-in and same-origin checks), and the dependency that hands it to the pages'
routers (``Kit``). The console: server-rendered pages over the gateway's own JSON API.

Every page and action calls ``/v1/...`` in this process (``httpx.ASGITransport``) with the
signed-in user's API key, so the console sees and does exactly what that key may through the API:
the same namespace, quotas, validation, idempotency and audit. The key is kept in an HttpOnly,
SameSite=Strict cookie scoped to ``/ui`` (with the gateway's ``--no-auth`` there is no sign-in).
Pages work without JavaScript; ``static/console.js`` (written here, no package) only follows an
open run's timeline live and confirms destructive actions.
"""

from __future__ import annotations

import json
import urllib.parse
import uuid
from pathlib import Path
from typing import Annotated, Any

import httpx
from fastapi import Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape

from kadence.readmodels.keys import RUN_STATUSES
from kadence.topics.batch import BATCH_OPERATIONS

from .console_timeline import attribute_text, duration, iso, ms_of
from .errors import ApiError
from .guard import NAMESPACE_HEADER, Guard
from .history_cursor import encode_cursor

__all__ = ["COOKIE", "NS_COOKIE", "TIMELINE_PAGE", "ConsoleKit", "Kit", "console_kit", "history_params", "wf_path"]

COOKIE = "kadence_console"
NS_COOKIE = "kadence_console_ns"
_HERE = Path(__file__).parent
#: how many timeline groups a workflow page renders at first (the rest: "show all"), from at
#: most how many of the history's last events
TIMELINE_PAGE = 200
TIMELINE_TAIL_EVENTS = 700


class _Api:
    """The gateway's JSON API, called in this process with the signed-in user's key."""

    def __init__(self, app: FastAPI) -> None:
        self._client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://console.local", timeout=60
        )

    async def call(self, request: Request, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {**kw.pop("headers", {}), **signed_in_headers(request)}
        return await self._client.request(method, path, headers=headers, **kw)

    async def aclose(self) -> None:
        await self._client.aclose()


def signed_in_headers(request: Request) -> dict[str, str]:
    """The API's headers for the console's signed-in user: the key and namespace of its cookies
    (lower-case names, as the guard reads them)."""
    headers = {}
    if key := request.cookies.get(COOKIE):
        headers["authorization"] = f"Bearer {key}"
    if ns := request.cookies.get(NS_COOKIE):
        headers[NAMESPACE_HEADER.lower()] = ns
    return headers


def history_params(run_id: str | None, length: int | None, whole: bool) -> dict[str, Any]:
    """The history API's query for a page: the whole run, or its last TIMELINE_TAIL_EVENTS events."""
    params = {"page_size": "10000"}
    if run_id:
        params["run_id"] = run_id
        if not whole and length and length > TIMELINE_TAIL_EVENTS:
            params["cursor"] = encode_cursor(length - TIMELINE_TAIL_EVENTS, run_id)
    return params


def wf_path(workflow_id: str) -> str:
    return urllib.parse.quote(workflow_id, safe="")


class ConsoleKit:
    """What every console page uses: the templates, the API client, and the checks before a page
    or a form post (``console_queues`` and the routes of ``mount_console``)."""

    def __init__(self, app: FastAPI, guard: Guard, auth: bool) -> None:
        self.guard = guard
        env = Environment(loader=FileSystemLoader(_HERE / "templates"), autoescape=select_autoescape(["html"]))
        env.filters["iso"] = iso
        env.filters["duration"] = duration
        env.filters["attribute"] = attribute_text
        env.filters["age"] = lambda when, now_ms: duration(max(0, now_ms - (ms_of(when) or now_ms)))
        env.filters["wf"] = wf_path
        env.filters["pretty"] = lambda v: json.dumps(v, indent=1, default=str)
        self.env = env
        self.auth = auth
        self.api = _Api(app)

    def page(self, request: Request, template: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        ctx.update(
            signed_in=bool(request.cookies.get(COOKIE)),
            auth=self.auth,
            statuses=RUN_STATUSES,
            namespace=request.cookies.get(NS_COOKIE) or "",
            operations=BATCH_OPERATIONS,
            new_id=lambda: str(uuid.uuid4()),
            path=request.url.path,
        )
        return HTMLResponse(
            self.env.get_template(template).render(**ctx),
            status_code=status,
            headers={
                "Cache-Control": "no-store",
                "X-Frame-Options": "DENY",
                "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
            },
        )

    def need_sign_in(self, request: Request) -> Response | None:
        if self.auth and not request.cookies.get(COOKIE):
            return RedirectResponse(f"/ui/login?next={urllib.parse.quote(str(request.url.path))}", 303)
        return None

    def api_error(self, request: Request, r: httpx.Response, what: str) -> Response:
        if r.status_code == 401:
            return RedirectResponse("/ui/login", 303)
        message = api_message(r, 500)
        return self.page(request, "error.html", status=r.status_code, what=what, message=message, code=r.status_code)

    def same_origin(self, request: Request) -> None:
        """A form post must come from this console (SameSite=Strict already keeps the cookie off
        cross-site requests; this refuses them without a cookie too)."""
        origin = request.headers.get("origin")
        if origin and urllib.parse.urlsplit(origin).netloc != request.url.netloc:
            raise ApiError(403, "forbidden", "cross-site form post refused")


def api_message(r: httpx.Response, limit: int = 300) -> str:
    """What an API error response says (its ``error.message``, else the start of its body)."""
    try:
        return str(r.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return r.text[:limit]


def console_kit(request: Request) -> ConsoleKit:
    """The console's kit (``mount_console`` put it on the app)."""
    kit: ConsoleKit = request.app.state.console_kit
    return kit


#: a page's dependency: ``kit: Kit``
Kit = Annotated[ConsoleKit, Depends(console_kit)]
