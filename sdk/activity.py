"""The activity API: activities are plain functions (async or sync) marked ``@activity.defn``.

They run at least once; ``activity.info().idempotency_key`` stays the same across attempts, for
passing to external systems so that a retried activity has its business effect once::

    from kadence import activity

    @activity.defn
    async def charge(order: dict) -> str:
        return await payments.charge(order["amount"], key=activity.info().idempotency_key)
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Callable

from kadence.topics.errors import KadenceError

from ._definitions import activity_definition

__all__ = ["defn", "info", "ActivityInfo"]


@dataclass(frozen=True)
class ActivityInfo:
    workflow_id: str
    run_id: str
    workflow_type: str
    activity_id: str
    activity_type: str
    task_queue: str
    attempt: int
    idempotency_key: str
    scheduled_time_ms: int
    heartbeat_details: object = None


_current: contextvars.ContextVar[ActivityInfo | None] = contextvars.ContextVar("kadence_activity", default=None)


def defn(fn: Callable | None = None, *, name: str | None = None):
    """Function decorator: an activity (``name`` defaults to the function name)."""

    def wrap(f: Callable) -> Callable:
        f.__kadence_activity__ = activity_definition(f, name)
        return f

    return wrap(fn) if fn is not None else wrap


def info() -> ActivityInfo:
    """The running activity's info (attempt number, idempotency key, ...)."""
    value = _current.get()
    if value is None:
        raise KadenceError("activity.info() can only be called from an activity run by a Worker")
    return value
