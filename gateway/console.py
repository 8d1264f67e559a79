"""The web console at ``/ui``: server-rendered pages over the gateway's own JSON API.

Every page and action calls ``/v1/...`` in this process (``httpx.ASGITransport``) with the
signed-in user's API key, so the console sees and does exactly what that key may through the API:
the same namespace, quotas, validation, idempotency and audit. The key is kept in an HttpOnly,
SameSite=Strict cookie scoped to ``/ui`` (with the gateway's ``--no-auth`` there is no sign-in).
Pages work without JavaScript; ``static/console.js`` (written here, no package) only follows an
open run's timeline live and confirms destructive actions.

The pages are module-level routers, one room each (``console_sign_in``, ``console_workflows``,
``console_operations``, ``console_queues``, ``console_schedules``, ``console_activities``), that get what they share (``ConsoleKit``: templates,
the API client, the checks) through a dependency (``console_kit.Kit``); ``mount_console`` puts
the kit on the app and includes them under ``/ui``.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from . import (
    console_activities,
    console_operations,
    console_queues,
    console_schedules,
    console_sign_in,
    console_streams,
    console_workflows,
)
from .console_kit import ConsoleKit
from .console_timeline import timeline
from .guard import Guard

__all__ = ["ConsoleKit", "mount_console", "timeline"]  # timeline: from console_timeline, re-exported

_HERE = Path(__file__).parent


def mount_console(app: FastAPI, guard: Guard, *, auth: bool) -> None:
    """Serve the console at ``/ui`` (and its static files at ``/ui/static``)."""
    kit = ConsoleKit(app, guard, auth)
    app.state.console_kit = kit
    # the order matters where paths overlap: a workflow's timeline before the workflow itself
    # (a stream's pages before the workflow's own, whose path takes everything after /workflows/)
    for module in (
        console_sign_in,
        console_streams,
        console_workflows,
        console_operations,
        console_queues,
        console_schedules,
        console_activities,
    ):
        app.include_router(module.router, prefix="/ui", include_in_schema=False)
    app.mount("/ui/static", StaticFiles(directory=_HERE / "static"), name="console-static")
    app.state.console_api = kit.api
