"""The console's live view of a workflow's stream (decision 0062): a page that follows
``/ui/workflows/{id}/stream/events`` with the browser's ``EventSource``, the same Server-Sent
Events as the API's ``GET /v1/workflows/{id}/streams/{stream}``, authorized by the console's
sign-in (an ``EventSource`` cannot send an ``Authorization`` header)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from kadence.topics.errors import InvalidIdentifierError
from kadence.topics.streams import check_stream

from .console_kit import Kit, signed_in_headers, wf_path
from .routes.streams import stream_events

__all__ = ["router"]

router = APIRouter(include_in_schema=False)


@router.get("/workflows/{workflow_id:path}/stream/events")
async def events(request: Request, kit: Kit, workflow_id: str, name: str = "") -> Response:
    who = await kit.guard.admit(signed_in_headers(request), mutation=False)  # 401/403/503 as the API answers them
    return await stream_events(request.app.state.gateway, who, workflow_id, check_stream(name), None)


@router.get("/workflows/{workflow_id:path}/stream", response_class=HTMLResponse)
async def page(request: Request, kit: Kit, workflow_id: str, name: str = "") -> Response:
    if (redirect := kit.need_sign_in(request)) is not None:
        return redirect
    problem = ""
    if name:
        try:
            check_stream(name)
        except InvalidIdentifierError as exc:
            problem, name = str(exc), ""
    src = f"/ui/workflows/{wf_path(workflow_id)}/stream/events?name={name}" if name else ""
    return kit.page(
        request,
        "stream.html",
        status=400 if problem else 200,
        workflow_id=workflow_id,
        name=name,
        src=src,
        problem=problem,
    )
