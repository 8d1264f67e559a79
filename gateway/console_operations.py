"""The console's operator pages: stuck workflows and dead letters (with redrive)."""

from __future__ import annotations

import urllib.parse
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from .console_kit import Kit

__all__ = ["router"]

router = APIRouter(include_in_schema=False)


@router.get("/stuck", response_class=HTMLResponse, response_model=None)
async def stuck(request: Request, kit: Kit) -> Any:
    if (redirect := kit.need_sign_in(request)) is not None:
        return redirect
    r = await kit.api.call(request, "GET", "/v1/stuck")
    if r.status_code != 200:
        return kit.api_error(request, r, "the stuck list")
    return kit.page(request, "stuck.html", rows=r.json()["workflows"])


@router.get("/dead-letters", response_class=HTMLResponse, response_model=None)
async def dead_letters(request: Request, kit: Kit, notice: str = "") -> Any:
    if (redirect := kit.need_sign_in(request)) is not None:
        return redirect
    r = await kit.api.call(request, "GET", "/v1/dead-letters")
    if r.status_code != 200:
        return kit.api_error(request, r, "the dead letters")
    return kit.page(request, "dead_letters.html", rows=r.json()["dead_letters"], notice=notice)


@router.post("/dead-letters/{ref}/redrive", response_model=None)
async def redrive(request: Request, kit: Kit, ref: str) -> Any:
    if (redirect := kit.need_sign_in(request)) is not None:
        return redirect
    kit.same_origin(request)
    r = await kit.api.call(request, "POST", f"/v1/dead-letters/{urllib.parse.quote(ref, safe=':')}/redrive")
    notice = (
        f"redriven {ref} to {r.json()['origin_topic']}"
        if r.status_code == 200
        else f"redrive of {ref} refused: {r.json()['error']['message']}"
    )
    return RedirectResponse("/ui/dead-letters?" + urllib.parse.urlencode({"notice": notice}), 303)
