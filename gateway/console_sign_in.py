"""The console's sign-in: the API key (and namespace) kept in HttpOnly cookies scoped to ``/ui``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.datastructures import Headers

from .console_kit import COOKIE, NS_COOKIE, Kit
from .errors import ApiError

__all__ = ["router"]

router = APIRouter(include_in_schema=False)


@router.get("", response_model=None)
@router.get("/")
async def home() -> Any:
    return RedirectResponse("/ui/workflows", 303)


@router.get("/login", response_class=HTMLResponse, response_model=None)
async def login_form(request: Request, kit: Kit, next: str = "/ui/workflows", failed: str = "") -> Any:
    return kit.page(request, "login.html", next=next if next.startswith("/ui/") else "/ui/workflows", failed=failed)


@router.post("/login", response_model=None)
async def login(
    request: Request,
    kit: Kit,
    key: str = Form(..., max_length=500),
    namespace: str = Form("", max_length=200),
    next: str = Form("/ui/workflows"),
) -> Any:
    kit.same_origin(request)
    headers = {"authorization": f"Bearer {key.strip()}"}
    if namespace.strip():
        headers["kadence-namespace"] = namespace.strip()
    try:
        who = await kit.guard.admit(Headers(headers), mutation=False)
    except ApiError as exc:
        return kit.page(request, "login.html", status=exc.status, next=next, failed=exc.message)
    target = next if next.startswith("/ui/") else "/ui/workflows"
    resp = RedirectResponse(target, 303)
    secure = request.url.scheme == "https"
    resp.set_cookie(COOKIE, key.strip(), httponly=True, samesite="strict", path="/ui", secure=secure)
    resp.set_cookie(NS_COOKIE, who.namespace, httponly=True, samesite="strict", path="/ui", secure=secure)
    return resp


@router.post("/logout", response_model=None)
async def logout(request: Request, kit: Kit) -> Any:
    kit.same_origin(request)
    resp = RedirectResponse("/ui/login", 303)
    resp.delete_cookie(COOKIE, path="/ui")
    resp.delete_cookie(NS_COOKIE, path="/ui")
    return resp
