"""The console's schedule pages: ``/ui/schedules``, every schedule (``GET /v1/schedules``) and
``/ui/schedules/{id}``, one schedule's spec, policy, counts, running and recent runs and next
times (``GET /v1/schedules/{id}``), with the buttons that pause, unpause, trigger and delete it
(through the same API, so the same checks, idempotency and audit apply)."""

from __future__ import annotations

import urllib.parse
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from .console_kit import Kit, api_message, wf_path

__all__ = ["router"]

router = APIRouter(include_in_schema=False)

_ACTIONS = {"pause": "POST", "unpause": "POST", "trigger": "POST", "delete": "DELETE"}


def _when(ms: int | None) -> str:
    if not ms:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@router.get("/schedules", response_class=HTMLResponse, response_model=None)
async def schedules(request: Request, kit: Kit, notice: str = "") -> Any:
    if (redirect := kit.need_sign_in(request)) is not None:
        return redirect
    r = await kit.api.call(request, "GET", "/v1/schedules", params={"page_size": 1000})
    if r.status_code != 200:
        return kit.api_error(request, r, "the schedules")
    rows = sorted(r.json()["schedules"], key=lambda s: s["schedule_id"])
    return kit.page(request, "schedules.html", rows=rows, notice=notice)


@router.get("/schedules/{schedule_id:path}", response_class=HTMLResponse, response_model=None)
async def schedule(request: Request, kit: Kit, schedule_id: str, notice: str = "") -> Any:
    if (redirect := kit.need_sign_in(request)) is not None:
        return redirect
    r = await kit.api.call(request, "GET", f"/v1/schedules/{wf_path(schedule_id)}")
    if r.status_code != 200:
        return kit.api_error(request, r, f"schedule {schedule_id}")
    desc = r.json()
    state = desc["state"]
    return kit.page(
        request,
        "schedule.html",
        schedule_id=schedule_id,
        sched_path=wf_path(schedule_id),
        state=state,
        spec=state["request"]["spec"],
        action=state["request"]["action"],
        policy=state["request"]["policy"],
        next_times=[_when(t) for t in desc["next_times_ms"]],
        recent=[{**run, "nominal": _when(run["nominal_ms"])} for run in reversed(state["recent"])],
        running=[{**run, "nominal": _when(run["nominal_ms"])} for run in state["running"]],
        created=_when(state["created_ms"]),
        notice=notice,
    )


@router.post("/schedules/{schedule_id:path}/act")
async def act(request: Request, kit: Kit, schedule_id: str, action: str = Form(...), note: str = Form("")) -> Response:
    """The schedule page's buttons, through the API."""
    if (redirect := kit.need_sign_in(request)) is not None:
        return redirect
    kit.same_origin(request)
    method = _ACTIONS.get(action)
    if method is None:
        return kit.page(
            request, "error.html", status=400, what="the schedule", message=f"no action {action!r}", code=400
        )
    path = f"/v1/schedules/{wf_path(schedule_id)}" + ("" if action == "delete" else f"/{action}")
    body = {"note": note} if action in ("pause", "unpause") else None
    r = await kit.api.call(request, method, path, json=body)
    if r.status_code == 401:
        return RedirectResponse("/ui/login", 303)
    if r.status_code != 200:
        notice = f"{action} of {schedule_id} not done: {api_message(r)}"
    elif action == "delete":
        return RedirectResponse("/ui/schedules?" + urllib.parse.urlencode({"notice": f"{schedule_id} deleted"}), 303)
    else:
        notice = f"{action}: done"
    return RedirectResponse(f"/ui/schedules/{wf_path(schedule_id)}?" + urllib.parse.urlencode({"notice": notice}), 303)
