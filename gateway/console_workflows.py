"""The console's workflow pages: the list (with the batch panel), a run's page and live timeline,
and every action of a run's page (signal, query, cancel, terminate, pause, unpause, reset)."""

from __future__ import annotations

import json
import urllib.parse
import uuid
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from kadence.topics.batch import BATCH_WORKFLOW_TYPE

from .console_kit import TIMELINE_PAGE, ConsoleKit, Kit, history_params, wf_path
from .console_timeline import chart, ms_of, run_input, timeline

__all__ = ["router"]

router = APIRouter(include_in_schema=False)


@router.get("/workflows", response_class=HTMLResponse, response_model=None)
async def workflows(
    request: Request,
    kit: Kit,
    type: str = "",
    status: str = "",
    paused: str = "",
    search: str = "",
    since: str = "",
    until: str = "",
    cursor: str = "",
) -> Any:
    if (redirect := kit.need_sign_in(request)) is not None:
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
                return kit.page(
                    request,
                    "error.html",
                    status=400,
                    what="the list",
                    message=f"{value!r} is not a time (2026-12-03T10:00 or epoch ms)",
                    code=400,
                )
    if cursor:
        params.append(("cursor", cursor))
    r = await kit.api.call(request, "GET", "/v1/workflows", params=params)
    if r.status_code != 200:
        return kit.api_error(request, r, "the list")
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
    return kit.page(
        request,
        "workflows.html",
        rows=body["workflows"],
        counts=body["counts"],
        q=query,
        next_url=next_url,
        batch_filter=json.dumps(batch_filter),
    )


async def _workflow_page(
    kit: ConsoleKit,
    request: Request,
    workflow_id: str,
    *,
    notice: str = "",
    plan: dict[str, Any] | None = None,
    query_result: Any = None,
    all_events: bool = False,
    status: int = 200,
) -> Response:
    path = wf_path(workflow_id)
    d = await kit.api.call(request, "GET", f"/v1/workflows/{path}")
    if d.status_code != 200:
        return kit.api_error(request, d, f"workflow {workflow_id}")
    described = d.json()
    h = await kit.api.call(
        request,
        "GET",
        f"/v1/workflows/{path}/history",
        params=history_params(described["run_id"], described.get("history_length"), all_events),
    )
    if h.status_code != 200:
        return kit.api_error(request, h, f"the history of {workflow_id}")
    hist = h.json()
    rows = timeline(hist["events"])
    shown = rows if all_events else rows[-TIMELINE_PAGE:]
    now_ms = int(datetime.now(tz=UTC).timestamp() * 1000)
    hidden = len(rows) - len(shown) + (hist["events"][0]["seq"] - 1 if hist["events"] else 0)
    batch = None
    if described.get("workflow_type") == BATCH_WORKFLOW_TYPE:
        b = await kit.api.call(request, "GET", f"/v1/batches/{path}")
        batch = b.json() if b.status_code == 200 else None
    done = [e["seq"] for e in hist["events"] if e["type"] == "WorkflowTaskCompleted"]
    return kit.page(
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


@router.get("/workflows/{workflow_id:path}/timeline", response_class=HTMLResponse, response_model=None)
async def timeline_fragment(request: Request, kit: Kit, workflow_id: str, run_id: str = "", length: int = 0) -> Any:
    """The timeline rows alone, for the page's live follow (console.js; ``length``: the
    history length it knows, so that only the tail is read)."""
    if (redirect := kit.need_sign_in(request)) is not None:
        return redirect
    h = await kit.api.call(
        request,
        "GET",
        f"/v1/workflows/{wf_path(workflow_id)}/history",
        params=history_params(run_id or None, length or None, False),
    )
    if h.status_code != 200:
        return kit.api_error(request, h, f"the history of {workflow_id}")
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


@router.get("/workflows/{workflow_id:path}", response_class=HTMLResponse, response_model=None)
async def workflow_page(request: Request, kit: Kit, workflow_id: str, all: str = "") -> Any:
    if (redirect := kit.need_sign_in(request)) is not None:
        return redirect
    return await _workflow_page(kit, request, workflow_id, all_events=bool(all))


@router.post("/workflows/{workflow_id:path}/action", response_model=None)
async def action(
    request: Request,
    kit: Kit,
    workflow_id: str,
    action: str = Form(...),
    reason: str = Form(""),
    signal_name: str = Form(""),
    args: str = Form("[]"),
    query_name: str = Form(""),
    to_event: str = Form(""),
    confirm: str = Form(""),
    request_id: str = Form(""),
) -> Any:
    """Every button of the workflow page: signal, cancel, terminate, pause, unpause, query,
    reset (a dry run first; the reset itself only from the plan's confirm button)."""
    if (redirect := kit.need_sign_in(request)) is not None:
        return redirect
    kit.same_origin(request)
    path = wf_path(workflow_id)
    try:
        parsed_args = json.loads(args or "[]")
        if not isinstance(parsed_args, list):
            raise ValueError("not a list")
    except ValueError:
        return await _workflow_page(
            kit, request, workflow_id, status=400, notice='arguments must be a JSON array, e.g. ["yes", 2]'
        )
    # one request ID per form shown: a double submit (or a retried post) is the same command
    key = {"Idempotency-Key": request_id} if request_id else {}
    if action in ("cancel", "terminate", "pause", "unpause"):
        body: dict[str, Any] = {"reason": reason}
        r = await kit.api.call(request, "POST", f"/v1/workflows/{path}/{action}", json=body, headers=key)
        return _done(path, action) if r.status_code == 200 else await _refused(kit, request, workflow_id, r, action)
    if action == "signal":
        body = {"signal": signal_name, "input": parsed_args}
        r = await kit.api.call(request, "POST", f"/v1/workflows/{path}/signals", json=body, headers=key)
        return _done(path, action) if r.status_code == 200 else await _refused(kit, request, workflow_id, r, action)
    if action == "query":
        r = await kit.api.call(
            request,
            "POST",
            f"/v1/workflows/{path}/queries/{urllib.parse.quote(query_name, safe='')}",
            json={"input": parsed_args},
        )
        if r.status_code != 200:
            return await _refused(kit, request, workflow_id, r, "query", "failed")
        result = {"name": query_name, "result": r.json()["result"]}
        return await _workflow_page(kit, request, workflow_id, query_result=result)
    if action == "reset":
        return await _reset(kit, request, workflow_id, reason, to_event, confirm == "yes", key)
    return await _workflow_page(kit, request, workflow_id, status=400, notice=f"unknown action {action!r}")


def _done(path: str, action: str) -> Response:
    return RedirectResponse(f"/ui/workflows/{path}?done={action}", 303)


async def _refused(
    kit: ConsoleKit, request: Request, workflow_id: str, r: Any, what: str, verb: str = "refused"
) -> Response:
    """The workflow page again, with the API's reason for refusing ``what``."""
    notice = f"{what} {verb}: {r.json()['error']['message']}"
    return await _workflow_page(kit, request, workflow_id, status=r.status_code, notice=notice)


async def _reset(
    kit: ConsoleKit,
    request: Request,
    workflow_id: str,
    reason: str,
    to_event: str,
    confirmed: bool,
    key: dict[str, Any],
) -> Response:
    """A dry run first (the plan, with a confirm button); the reset itself only when confirmed."""
    body: dict[str, Any] = {"reason": reason, "dry_run": not confirmed}
    if to_event:
        try:
            body["to_event"] = int(to_event)
        except ValueError:
            notice = f"event {to_event!r} is not a number: give the seq of a WorkflowTaskCompleted event"
            return await _workflow_page(kit, request, workflow_id, status=400, notice=notice)
    path = wf_path(workflow_id)
    r = await kit.api.call(request, "POST", f"/v1/workflows/{path}/reset", json=body, headers=key)
    if r.status_code != 200:
        what = "the reset" if body["dry_run"] else "reset"
        return await _refused(kit, request, workflow_id, r, what, "would be refused" if body["dry_run"] else "refused")
    if body["dry_run"]:
        plan = {**r.json()["plan"], "reason": reason, "request_id": str(uuid.uuid4())}
        return await _workflow_page(kit, request, workflow_id, plan=plan)
    return _done(path, "reset")


@router.get("/batches", include_in_schema=False, response_model=None)
async def batches_home() -> Any:
    """Batches start from the list's filter (its "Act on every run" panel): go there (this
    address answered 405 to a browser that followed it)."""
    return RedirectResponse("/ui/workflows", status_code=303)


@router.post("/batches", response_model=None)
async def start_batch(
    request: Request,
    kit: Kit,
    operation: str = Form(...),
    filter: str = Form(...),
    reason: str = Form(""),
    signal_name: str = Form(""),
    args: str = Form("[]"),
    request_id: str = Form(""),
) -> Any:
    if (redirect := kit.need_sign_in(request)) is not None:
        return redirect
    kit.same_origin(request)
    try:
        body = {
            "operation": operation,
            "filter": json.loads(filter),
            "reason": reason,
            "signal_name": signal_name or None,
            "signal_args": json.loads(args or "[]"),
        }
    except ValueError:
        return kit.page(request, "error.html", status=400, what="the batch", message="arguments must be JSON", code=400)
    r = await kit.api.call(
        request, "POST", "/v1/batches", json=body, headers={"Idempotency-Key": request_id} if request_id else {}
    )
    if r.status_code != 201:
        return kit.api_error(request, r, "the batch")
    return RedirectResponse(f"/ui/workflows/{wf_path(r.json()['batch_id'])}", 303)
