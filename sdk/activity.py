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
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from kadence.schemas.records import ActivityTask
from kadence.topics.errors import KadenceError
from kadence.topics.payload import PayloadConverter

from ._definitions import activity_definition

__all__ = ["ActivityInfo", "defn", "heartbeat", "info", "is_cancelled"]


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
    heartbeat_timeout_ms: int | None = None
    #: the headers its workflow was started with (``kadence.interceptors``)
    headers: dict[str, Any] = field(default_factory=dict)


def info_from_task(task: ActivityTask, converter: PayloadConverter) -> ActivityInfo:
    """The ``ActivityInfo`` of an ``ActivityTask`` record (a worker's and ``kadence.testing``'s)."""
    return ActivityInfo(
        workflow_id=task["workflow_id"],
        run_id=task["run_id"],
        workflow_type=task["workflow_type"],
        activity_id=task["activity_id"],
        activity_type=task["activity_type"],
        task_queue=task["task_queue"],
        attempt=task["attempt"],
        idempotency_key=task["idempotency_key"],
        scheduled_time_ms=task["scheduled_time_ms"],
        heartbeat_details=converter.from_bytes(task["heartbeat_details"]),
        heartbeat_timeout_ms=task["heartbeat_timeout_ms"],
        headers=dict(task.get("headers") or {}),
    )


class ActivityContext:
    """The worker's side of a running activity: heartbeats and cancellation."""

    def __init__(
        self,
        info: ActivityInfo,
        send_heartbeat: Callable[[ActivityContext, Any], None],
        on_cancel: Callable[[], object],
    ) -> None:
        self.info = info
        self._send = send_heartbeat
        self._on_cancel = on_cancel
        self.cancelled = threading.Event()
        self._last_sent = 0.0
        self._lock = threading.Lock()
        self._pending: tuple[Any, ...] | None = None
        self._timer: threading.Timer | None = None
        self._closed = False
        timeout = (info.heartbeat_timeout_ms or 0) / 1000
        # throttle: often enough to beat the heartbeat timeout, never more than needed
        self.interval = min(max(timeout * 0.5, 0.05), 10.0) if timeout else 1.0

    def heartbeat(self, details: Any) -> None:
        """Send now if the throttle interval passed, else send the latest details when it does."""
        with self._lock:
            if self._closed:
                return
            self._pending = (details,)
            now = time.monotonic()
            wait = self.interval - (now - self._last_sent)
            if wait <= 0:
                self._send_pending_locked(now)
            elif self._timer is None:
                self._timer = threading.Timer(wait, self._flush)
                self._timer.daemon = True
                self._timer.start()

    def _send_pending_locked(self, now: float) -> None:
        if self._pending is not None:
            (details,) = self._pending
            self._pending = None
            self._last_sent = now
            self._send(self, details)

    def _flush(self) -> None:
        with self._lock:
            self._timer = None
            if not self._closed:
                self._send_pending_locked(time.monotonic())

    def close(self) -> None:
        """The attempt is over: no more heartbeats."""
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def cancel(self) -> None:
        if not self.cancelled.is_set():
            self.cancelled.set()
            self._on_cancel()


_F = TypeVar("_F", bound=Callable[..., Any])

_current: contextvars.ContextVar[ActivityContext | None] = contextvars.ContextVar("kadence_activity", default=None)


@overload
def defn(fn: _F, *, name: str | None = None) -> _F: ...


@overload
def defn(fn: None = None, *, name: str | None = None) -> Callable[[_F], _F]: ...


def defn(fn: _F | None = None, *, name: str | None = None) -> _F | Callable[[_F], _F]:
    """Function decorator: an activity (``name`` defaults to the function name)."""

    def wrap(f: _F) -> _F:
        setattr(f, "__kadence_activity__", activity_definition(f, name))
        return f

    return wrap(fn) if fn is not None else wrap


def _context() -> ActivityContext:
    value = _current.get()
    if value is None:
        raise KadenceError("this function can only be called from an activity run by a Worker")
    return value


def info() -> ActivityInfo:
    """The running activity's info (attempt number, idempotency key, last heartbeat details ...)."""
    return _context().info


def heartbeat(*details: Any) -> None:
    """Report progress (``details`` must be JSON-serializable; the next attempt reads them as
    ``info().heartbeat_details``). Heartbeats keep a heartbeat timeout from firing and are the
    channel through which cancellation reaches the activity: an async activity is cancelled
    (``asyncio.CancelledError``), a sync one sees ``is_cancelled()`` become true."""
    ctx = _context()
    ctx.heartbeat(list(details) if len(details) != 1 else details[0])


def is_cancelled() -> bool:
    """True once the engine said this attempt should stop (workflow gave up on it, or it is
    no longer the current attempt)."""
    return _context().cancelled.is_set()
