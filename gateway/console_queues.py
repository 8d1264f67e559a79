"""The console's task-queue pages: ``/ui/builds``, what waits on each queue and on each worker
build, each queue's rate limits, and the form that sets or lifts them (through
``PUT``/``DELETE /v1/queues/{task_queue}/limits``, so the same validation and audit apply);
``/ui/limits``, each concurrency limit key's slots in use and who holds and waits for them
(``GET /v1/limits``)."""

from __future__ import annotations

import urllib.parse
from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from .console_kit import Kit, api_message

__all__ = ["parse_type_limits", "router"]

router = APIRouter(include_in_schema=False)


def parse_type_limits(text: str) -> dict[str, float] | str:
    """``charge=5, refund=0.5`` -> {type: per second}; a message naming the bad part otherwise."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.replace("\n", ",").split(",")):
        if not part:
            continue
        name, sep, rate = part.rpartition("=")
        try:
            value = float(rate)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            return f"{part!r}: write TYPE=PER_SECOND, e.g. charge=5"
        out[name.strip()] = value
    return out


@router.get("/builds", response_class=HTMLResponse, response_model=None)
async def builds(request: Request, kit: Kit, notice: str = "") -> Any:
    if (redirect := kit.need_sign_in(request)) is not None:
        return redirect
    r = await kit.api.call(request, "GET", "/v1/queues")
    if r.status_code != 200:
        return kit.api_error(request, r, "the builds")
    doc = r.json()
    return kit.page(
        request,
        "builds.html",
        rows=doc["builds"],
        queues=doc["queues"],
        limits={x["task_queue"]: x for x in doc["limits"]},
        notice=notice,
    )


@router.get("/limits", response_class=HTMLResponse, response_model=None)
async def concurrency_limits(request: Request, kit: Kit, key: str = "") -> Any:
    if (redirect := kit.need_sign_in(request)) is not None:
        return redirect
    r = await kit.api.call(request, "GET", "/v1/limits", params={"key": key} if key else None)
    if r.status_code != 200:
        return kit.api_error(request, r, "the concurrency limits")
    notice = request.query_params.get("notice", "")
    return kit.page(request, "limits.html", limits=r.json()["limits"], key=key, notice=notice)


@router.post("/limits/max")
async def set_limit_max(
    request: Request,
    kit: Kit,
    key: str = Form(...),
    action: str = Form("set"),
    max: str = Form(""),
    per_seconds: str = Form(""),
    reason: str = Form(""),
) -> Response:
    """The key page's form: an operator's max for the key (or lift it), through ``PUT``/``DELETE
    /v1/limits/{key}`` (the same checks and audit)."""
    if (redirect := kit.need_sign_in(request)) is not None:
        return redirect
    kit.same_origin(request)
    path = f"/v1/limits/{urllib.parse.quote(key, safe='=')}"
    back = "/ui/limits?" + urllib.parse.urlencode({"key": key})
    try:
        per = float(per_seconds) if per_seconds.strip() else None
        if action == "lift":
            params = {"reason": reason} | ({} if per is None else {"per_seconds": per})
            r = await kit.api.call(request, "DELETE", path, params=params)
        else:
            r = await kit.api.call(request, "PUT", path, json={"max": int(max), "per_seconds": per, "reason": reason})
    except ValueError:
        return RedirectResponse(back + "&" + urllib.parse.urlencode({"notice": f"{max!r} is not a number"}), 303)
    if r.status_code == 401:
        return RedirectResponse("/ui/login", 303)
    if r.status_code != 200:
        notice = f"the max of {key} not changed: {api_message(r)}"
    else:
        notice = r.json()["message"]
    return RedirectResponse(back + "&" + urllib.parse.urlencode({"notice": notice}), 303)


@router.post("/queues/limits")
async def set_limits(
    request: Request,
    kit: Kit,
    task_queue: str = Form(...),
    action: str = Form("set"),
    activities_per_second: str = Form(""),
    activity_types: str = Form(""),
    reason: str = Form(""),
) -> Response:
    if (redirect := kit.need_sign_in(request)) is not None:
        return redirect
    kit.same_origin(request)
    path = f"/v1/queues/{urllib.parse.quote(task_queue, safe='')}/limits"
    if action == "lift":
        r = await kit.api.call(request, "DELETE", path, params={"reason": reason})
    else:
        types = parse_type_limits(activity_types)
        if isinstance(types, str):
            return _back(f"limits of {task_queue} not changed: {types}")
        body: dict[str, Any] = {"activity_types": types, "reason": reason}
        if activities_per_second.strip():
            try:
                body["activities_per_second"] = float(activities_per_second)
            except ValueError:
                return _back(f"limits of {task_queue} not changed: {activities_per_second!r} is not a number")
        r = await kit.api.call(request, "PUT", path, json=body)
    if r.status_code == 401:
        return RedirectResponse("/ui/login", 303)
    if r.status_code != 200:
        return _back(f"limits of {task_queue} not changed: {api_message(r)}")
    return _back(f"limits of {task_queue} {'lifted' if action == 'lift' else 'set'}")


def _back(notice: str) -> Response:
    return RedirectResponse("/ui/builds?" + urllib.parse.urlencode({"notice": notice}), 303)
