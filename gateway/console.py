"""The web console at ``/ui``: server-rendered pages over the gateway's own JSON API.

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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from fastapi import APIRouter, FastAPI, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.datastructures import Headers

from kadence.readmodels.keys import RUN_STATUSES
from kadence.topics.batch import BATCH_OPERATIONS, BATCH_WORKFLOW_TYPE

from .console_queues import queue_pages
from .console_timeline import attribute_text, chart, duration, iso, ms_of, run_input, timeline
from .errors import ApiError
from .guard import Guard
from .history_cursor import encode_cursor

__all__ = ["ConsoleKit", "mount_console", "timeline"]  # timeline: from console_timeline, re-exported

COOKIE = "kadence_console"
NS_COOKIE = "kadence_console_ns"
_HERE = Path(__file__).parent
#: how many timeline groups a workflow page renders at first (the rest: "show all"), from at
#: most how many of the history's last events
TIMELINE_PAGE = 200
TIMELINE_TAIL_EVENTS = 700


class _Api:
    """The gateway's JSON API, called in this process with the signed-in user's key."""

    def __init__(self, app: FastAPI):
        self._client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://console.local", timeout=60
        )

    async def call(self, request: Request, method: str, path: str, **kw) -> httpx.Response:
        headers = dict(kw.pop("headers", {}))
        key = request.cookies.get(COOKIE)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        ns = request.cookies.get(NS_COOKIE)
        if ns:
            headers["Kadence-Namespace"] = ns
        return await self._client.request(method, path, headers=headers, **kw)

    async def aclose(self) -> None:
        await self._client.aclose()


def _history_params(run_id: str | None, length: int | None, whole: bool) -> dict:
    """The history API's query for a page: the whole run, or its last TIMELINE_TAIL_EVENTS events."""
    params = {"page_size": "10000"}
    if run_id:
        params["run_id"] = run_id
        if not whole and length and length > TIMELINE_TAIL_EVENTS:
            params["cursor"] = encode_cursor(length - TIMELINE_TAIL_EVENTS, run_id)
    return params


def _wf_path(workflow_id: str) -> str:
    return urllib.parse.quote(workflow_id, safe="")


class ConsoleKit:
    """What every console page uses: the templates, the API client, and the checks before a page
    or a form post (``console_queues`` and the routes of ``mount_console``)."""

    def __init__(self, app: FastAPI, auth: bool) -> None:
        env = Environment(loader=FileSystemLoader(_HERE / "templates"), autoescape=select_autoescape(["html"]))
        env.filters["iso"] = iso
        env.filters["duration"] = duration
        env.filters["attribute"] = attribute_text
        env.filters["age"] = lambda when, now_ms: duration(max(0, now_ms - (ms_of(when) or now_ms)))
        env.filters["wf"] = _wf_path
        env.filters["pretty"] = lambda v: json.dumps(v, indent=1, default=str)
        self.env = env
        self.auth = auth
        self.api = _Api(app)

    def page(self, request: Request, template: str, status: int = 200, **ctx) -> HTMLResponse:
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
        try:
            message = r.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = r.text[:500]
        return self.page(request, "error.html", status=r.status_code, what=what, message=message, code=r.status_code)

    def same_origin(self, request: Request) -> None:
        """A form post must come from this console (SameSite=Strict already keeps the cookie off
        cross-site requests; this refuses them without a cookie too)."""
        origin = request.headers.get("origin")
        if origin and urllib.parse.urlsplit(origin).netloc != request.url.netloc:
            raise ApiError(403, "forbidden", "cross-site form post refused")


def mount_console(app: FastAPI, guard: Guard, *, auth: bool) -> None:
    """Serve the console at ``/ui`` (and its static files at ``/ui/static``)."""
    kit = ConsoleKit(app, auth)
    api, page, need_sign_in, api_error, same_origin = (
        kit.api,
        kit.page,
        kit.need_sign_in,
        kit.api_error,
        kit.same_origin,
    )
    router = APIRouter(prefix="/ui", include_in_schema=False)

    @router.get("", include_in_schema=False)
    @router.get("/", include_in_schema=False)
    async def home():
        return RedirectResponse("/ui/workflows", 303)

    @router.get("/login", response_class=HTMLResponse)
    async def login_form(request: Request, next: str = "/ui/workflows", failed: str = ""):
        return page(request, "login.html", next=next if next.startswith("/ui/") else "/ui/workflows", failed=failed)

    @router.post("/login")
    async def login(
        request: Request,
        key: str = Form(..., max_length=500),
        namespace: str = Form("", max_length=200),
        next: str = Form("/ui/workflows"),
    ):
        same_origin(request)
        headers = {"authorization": f"Bearer {key.strip()}"}
        if namespace.strip():
            headers["kadence-namespace"] = namespace.strip()
        try:
            who = await guard.admit(Headers(headers), mutation=False)
        except ApiError as exc:
            return page(request, "login.html", status=exc.status, next=next, failed=exc.message)
        target = next if next.startswith("/ui/") else "/ui/workflows"
        resp = RedirectResponse(target, 303)
        secure = request.url.scheme == "https"
        resp.set_cookie(COOKIE, key.strip(), httponly=True, samesite="strict", path="/ui", secure=secure)
        resp.set_cookie(NS_COOKIE, who.namespace, httponly=True, samesite="strict", path="/ui", secure=secure)
        return resp

    @router.post("/logout")
    async def logout(request: Request):
        same_origin(request)
        resp = RedirectResponse("/ui/login", 303)
        resp.delete_cookie(COOKIE, path="/ui")
        resp.delete_cookie(NS_COOKIE, path="/ui")
        return resp

    @router.get("/workflows", response_class=HTMLResponse)
    async def workflows(
        request: Request,
        type: str = "",
        status: str = "",
        paused: str = "",
        search: str = "",
        since: str = "",
        until: str = "",
        cursor: str = "",
    ):
        if (redirect := need_sign_in(request)) is not None:
            return redirect
        params: list[tuple[str, str]] = [("page_size", "50"), ("include_counts", "true")]
        if type:
            params.append(("type", type))
        if status:
            params.append(("status", status))
        if paused in ("true", "false"):
            params.append(("paused", paused))
        for item in filter(None, (s.strip() for s in search.split(","))):
            params.append(("search", item.replace("=", ":", 1)))
        for name, value in (("start_from_ms", since), ("start_to_ms", until)):
            if value:
                try:
                    params.append((name, str(ms_of(value) if "-" in value else int(value))))
                except ValueError:
                    return page(
                        request,
                        "error.html",
                        status=400,
                        what="the list",
                        message=f"{value!r} is not a time (2026-12-03T10:00 or epoch ms)",
                        code=400,
                    )
        if cursor:
            params.append(("cursor", cursor))
        r = await api.call(request, "GET", "/v1/workflows", params=params)
        if r.status_code != 200:
            return api_error(request, r, "the list")
        body = r.json()
        query = {"type": type, "status": status, "paused": paused, "search": search, "since": since, "until": until}
        next_url = None
        if body["next_cursor"]:
            next_url = "/ui/workflows?" + urllib.parse.urlencode(
                {**{k: v for k, v in query.items() if v}, "cursor": body["next_cursor"]}
            )
        batch_filter = {
            "workflow_type": type or None,
            "status": status or None,
            "paused": {"true": True, "false": False}.get(paused),
            "search": dict(s.split("=", 1) for s in search.split(",") if "=" in s),
        }
        return page(
            request,
            "workflows.html",
            rows=body["workflows"],
            counts=body["counts"],
            q=query,
            next_url=next_url,
            batch_filter=json.dumps(batch_filter),
        )

    async def _workflow_page(
        request: Request,
        workflow_id: str,
        *,
        notice: str = "",
        plan: dict | None = None,
        query_result: Any = None,
        all_events: bool = False,
        status: int = 200,
    ) -> Response:
        path = _wf_path(workflow_id)
        d = await api.call(request, "GET", f"/v1/workflows/{path}")
        if d.status_code != 200:
            return api_error(request, d, f"workflow {workflow_id}")
        described = d.json()
        h = await api.call(
            request,
            "GET",
            f"/v1/workflows/{path}/history",
            params=_history_params(described["run_id"], described.get("history_length"), all_events),
        )
        if h.status_code != 200:
            return api_error(request, h, f"the history of {workflow_id}")
        hist = h.json()
        rows = timeline(hist["events"])
        shown = rows if all_events else rows[-TIMELINE_PAGE:]
        now_ms = int(datetime.now(tz=UTC).timestamp() * 1000)
        hidden = len(rows) - len(shown) + (hist["events"][0]["seq"] - 1 if hist["events"] else 0)
        batch = None
        if described.get("workflow_type") == BATCH_WORKFLOW_TYPE:
            b = await api.call(request, "GET", f"/v1/batches/{path}")
            batch = b.json() if b.status_code == 200 else None
        done = [e["seq"] for e in hist["events"] if e["type"] == "WorkflowTaskCompleted"]
        return page(
            request,
            "workflow.html",
            status=status,
            wf=described,
            rows=shown,
            hidden=hidden,
            events=described.get("history_length") or len(hist["events"]),
            last_seq=hist["events"][-1]["seq"] if hist["events"] else 0,
            # follow while describe says running, even when the history read a moment
            # later is closed already: the first poll then reloads the page
            closed=hist["closed"] and described["status"] != "running",
            notice=notice,
            plan=plan,
            query_result=query_result,
            reset_points=done,
            batch=batch,
            bars=chart(rows, now_ms),
            run_input=run_input(hist["events"]),
            has_input=bool(hist["events"]) and hist["events"][0]["type"] == "WorkflowExecutionStarted",
            now_ms=now_ms,
        )

    @router.get("/workflows/{workflow_id:path}/timeline", response_class=HTMLResponse)
    async def timeline_fragment(request: Request, workflow_id: str, run_id: str = "", length: int = 0):
        """The timeline rows alone, for the page's live follow (console.js; ``length``: the
        history length it knows, so that only the tail is read)."""
        if (redirect := need_sign_in(request)) is not None:
            return redirect
        h = await api.call(
            request,
            "GET",
            f"/v1/workflows/{_wf_path(workflow_id)}/history",
            params=_history_params(run_id or None, length or None, False),
        )
        if h.status_code != 200:
            return api_error(request, h, f"the history of {workflow_id}")
        hist = h.json()
        rows = timeline(hist["events"])[-TIMELINE_PAGE:]
        last = hist["events"][-1]["seq"] if hist["events"] else 0
        return HTMLResponse(
            kit.env.get_template("timeline.html").render(rows=rows),
            headers={
                "Kadence-Last-Seq": str(last),
                "Kadence-Closed": str(hist["closed"]).lower(),
                "Cache-Control": "no-store",
            },
        )

    @router.get("/workflows/{workflow_id:path}", response_class=HTMLResponse)
    async def workflow_page(request: Request, workflow_id: str, all: str = ""):
        if (redirect := need_sign_in(request)) is not None:
            return redirect
        return await _workflow_page(request, workflow_id, all_events=bool(all))

    @router.post("/workflows/{workflow_id:path}/action")
    async def action(
        request: Request,
        workflow_id: str,
        action: str = Form(...),
        reason: str = Form(""),
        signal_name: str = Form(""),
        args: str = Form("[]"),
        query_name: str = Form(""),
        to_event: str = Form(""),
        confirm: str = Form(""),
        request_id: str = Form(""),
    ):
        """Every button of the workflow page: signal, cancel, terminate, pause, unpause, query,
        reset (a dry run first; the reset itself only from the plan's confirm button)."""
        if (redirect := need_sign_in(request)) is not None:
            return redirect
        same_origin(request)
        path = _wf_path(workflow_id)
        try:
            parsed_args = json.loads(args or "[]")
            if not isinstance(parsed_args, list):
                raise ValueError("not a list")
        except ValueError:
            return await _workflow_page(
                request, workflow_id, status=400, notice='arguments must be a JSON array, e.g. ["yes", 2]'
            )
        # one request ID per form shown: a double submit (or a retried post) is the same command
        key = {"Idempotency-Key": request_id} if request_id else {}
        if action in ("cancel", "terminate", "pause", "unpause"):
            r = await api.call(request, "POST", f"/v1/workflows/{path}/{action}", json={"reason": reason}, headers=key)
            if r.status_code != 200:
                return await _workflow_page(
                    request,
                    workflow_id,
                    status=r.status_code,
                    notice=f"{action} refused: {r.json()['error']['message']}",
                )
            return RedirectResponse(f"/ui/workflows/{path}?done={action}", 303)
        if action == "signal":
            r = await api.call(
                request,
                "POST",
                f"/v1/workflows/{path}/signals",
                json={"signal": signal_name, "input": parsed_args},
                headers=key,
            )
            if r.status_code != 200:
                return await _workflow_page(
                    request, workflow_id, status=r.status_code, notice=f"signal refused: {r.json()['error']['message']}"
                )
            return RedirectResponse(f"/ui/workflows/{path}?done=signal", 303)
        if action == "query":
            r = await api.call(
                request,
                "POST",
                f"/v1/workflows/{path}/queries/{urllib.parse.quote(query_name, safe='')}",
                json={"input": parsed_args},
            )
            if r.status_code != 200:
                return await _workflow_page(
                    request, workflow_id, status=r.status_code, notice=f"query failed: {r.json()['error']['message']}"
                )
            return await _workflow_page(
                request, workflow_id, query_result={"name": query_name, "result": r.json()["result"]}
            )
        if action == "reset":
            body = {"reason": reason, "dry_run": confirm != "yes"}
            if to_event:
                body["to_event"] = int(to_event)
            r = await api.call(request, "POST", f"/v1/workflows/{path}/reset", json=body, headers=key)
            if r.status_code != 200:
                prefix = "the reset would be refused" if body["dry_run"] else "reset refused"
                return await _workflow_page(
                    request, workflow_id, status=r.status_code, notice=f"{prefix}: {r.json()['error']['message']}"
                )
            if body["dry_run"]:
                return await _workflow_page(
                    request, workflow_id, plan={**r.json()["plan"], "reason": reason, "request_id": str(uuid.uuid4())}
                )
            return RedirectResponse(f"/ui/workflows/{path}?done=reset", 303)
        return await _workflow_page(request, workflow_id, status=400, notice=f"unknown action {action!r}")

    @router.get("/batches", include_in_schema=False)
    async def batches_home():
        """Batches start from the list's filter (its "Act on every run" panel): go there (this
        address answered 405 to a browser that followed it)."""
        return RedirectResponse("/ui/workflows", status_code=303)

    @router.post("/batches")
    async def start_batch(
        request: Request,
        operation: str = Form(...),
        filter: str = Form(...),
        reason: str = Form(""),
        signal_name: str = Form(""),
        args: str = Form("[]"),
        request_id: str = Form(""),
    ):
        if (redirect := need_sign_in(request)) is not None:
            return redirect
        same_origin(request)
        try:
            body = {
                "operation": operation,
                "filter": json.loads(filter),
                "reason": reason,
                "signal_name": signal_name or None,
                "signal_args": json.loads(args or "[]"),
            }
        except ValueError:
            return page(request, "error.html", status=400, what="the batch", message="arguments must be JSON", code=400)
        r = await api.call(
            request, "POST", "/v1/batches", json=body, headers={"Idempotency-Key": request_id} if request_id else {}
        )
        if r.status_code != 201:
            return api_error(request, r, "the batch")
        return RedirectResponse(f"/ui/workflows/{_wf_path(r.json()['batch_id'])}", 303)

    @router.get("/stuck", response_class=HTMLResponse)
    async def stuck(request: Request):
        if (redirect := need_sign_in(request)) is not None:
            return redirect
        r = await api.call(request, "GET", "/v1/stuck")
        if r.status_code != 200:
            return api_error(request, r, "the stuck list")
        return page(request, "stuck.html", rows=r.json()["workflows"])

    @router.get("/dead-letters", response_class=HTMLResponse)
    async def dead_letters(request: Request, notice: str = ""):
        if (redirect := need_sign_in(request)) is not None:
            return redirect
        r = await api.call(request, "GET", "/v1/dead-letters")
        if r.status_code != 200:
            return api_error(request, r, "the dead letters")
        return page(request, "dead_letters.html", rows=r.json()["dead_letters"], notice=notice)

    @router.post("/dead-letters/{ref}/redrive")
    async def redrive(request: Request, ref: str):
        if (redirect := need_sign_in(request)) is not None:
            return redirect
        same_origin(request)
        r = await api.call(request, "POST", f"/v1/dead-letters/{urllib.parse.quote(ref, safe=':')}/redrive")
        notice = (
            f"redriven {ref} to {r.json()['origin_topic']}"
            if r.status_code == 200
            else f"redrive of {ref} refused: {r.json()['error']['message']}"
        )
        return RedirectResponse("/ui/dead-letters?" + urllib.parse.urlencode({"notice": notice}), 303)

    queue_pages(router, kit)
    app.include_router(router)
    app.mount("/ui/static", StaticFiles(directory=_HERE / "static"), name="console-static")
    app.state.console_api = api
