"""The console's standalone-activity page: ``/ui/activities``, the standalone activities
(``GET /v1/activities``, from the visibility projection) with their status counts, each linked to
its run's page (``/ui/workflows/kadence-activity:{id}``: describe, attempt, last failure,
heartbeat, timeline, cancel and terminate)."""

from __future__ import annotations

import urllib.parse
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from kadence.topics.standalone import activity_key

from .console_kit import Kit, wf_path

__all__ = ["router"]

router = APIRouter(include_in_schema=False)

STATUSES = ("running", "completed", "failed", "canceled", "terminated", "timed_out")


@router.get("/activities", response_class=HTMLResponse, response_model=None)
async def activities(request: Request, kit: Kit, type: str = "", status: str = "", cursor: str = "") -> Any:
    if (redirect := kit.need_sign_in(request)) is not None:
        return redirect
    params: list[tuple[str, str]] = [("page_size", "50"), ("include_counts", "true")]
    params += [(k, v) for k, v in (("type", type), ("status", status), ("cursor", cursor)) if v]
    r = await kit.api.call(request, "GET", "/v1/activities", params=params)
    if r.status_code != 200:
        return kit.api_error(request, r, "the standalone activities")
    body = r.json()
    rows = [{**a, "run_path": wf_path(activity_key(a["activity_id"]))} for a in body["activities"]]
    next_url = None
    if body["next_cursor"]:
        keep = [(k, v) for k, v in (("type", type), ("status", status)) if v]
        next_url = "/ui/activities?" + urllib.parse.urlencode([*keep, ("cursor", body["next_cursor"])])
    return kit.page(
        request,
        "activities.html",
        rows=rows,
        counts=body["counts"],
        q={"type": type, "status": status},
        statuses=STATUSES,
        next_url=next_url,
    )
