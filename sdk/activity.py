"""The activity API: activities are plain functions (async or sync) marked ``@activity.defn``.

They run at least once; ``activity.info().idempotency_key`` stays the same across attempts, for
passing to external systems so that a retried activity has its business effect once::

    from kadence import activity

    @activity.defn
    async def charge(order: dict) -> str:
        return await payments.charge(order["amount"], key=activity.info().idempotency_key)
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar, overload

from kadence.schemas.records import ActivityTask
from kadence.topics.async_completion import task_token
from kadence.topics.errors import KadenceError
from kadence.topics.payload import PayloadConverter
from kadence.topics.standalone import is_activity_key
from kadence.topics.streams import PublishBuffer, check_stream, check_streams_writable

from ._definitions import Priority, activity_definition

__all__ = [
    "ActivityInfo",
    "CompleteAsyncError",
    "defn",
    "heartbeat",
    "info",
    "is_cancelled",
    "is_worker_shutdown",
    "logger",
    "publish",
    "raise_complete_async",
    "wait_for_cancelled",
    "wait_for_cancelled_sync",
]


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
    #: the history event that scheduled the activity (0 for a local activity)
    scheduled_seq: int = 0
    #: the priority it was dispatched with (its own, else its run's; None: level 3, no key)
    priority: Priority | None = None

    @property
    def standalone(self) -> bool:
        """Whether this is a standalone activity (``Client.start_activity``): then it has no
        workflow; ``workflow_id`` is the engine's key of its run (``kadence-activity:{id}``)."""
        return is_activity_key(self.workflow_id)

    @property
    def task_token(self) -> bytes:
        """Names this attempt for ``Client.get_async_activity_handle`` (``raise_complete_async``);
        encoded when asked for, not for every attempt a worker runs."""
        return task_token(self.workflow_id, self.run_id, self.activity_id, self.scheduled_seq, self.attempt)


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
        scheduled_seq=task["scheduled_seq"],
        priority=Priority.from_record(task.get("priority")),
    )


class CompleteAsyncError(BaseException):
    """Raised by ``raise_complete_async()``: the activity returns without a result; something
    else completes it later (``Client.get_async_activity_handle``). A ``BaseException``, so that
    an activity's ``except Exception`` does not swallow it."""


def raise_complete_async() -> NoReturn:
    """End this activity function without completing the activity: the worker reports nothing,
    and the attempt stays open, with its timeouts, until ``AsyncActivityHandle.complete`` /
    ``fail`` (from any process, with ``info().task_token``, or over HTTP)."""
    _context()
    raise CompleteAsyncError()


class ActivityContext:
    """The worker's side of a running activity: heartbeats and cancellation."""

    def __init__(
        self,
        info: ActivityInfo,
        send_heartbeat: Callable[[ActivityContext, Any], None],
        on_cancel: Callable[[], object],
        *,
        is_async: bool = False,
    ) -> None:
        self.info = info
        self.is_async = is_async
        self._send = send_heartbeat
        self._on_cancel: list[Callable[[], object]] = [on_cancel]
        #: set when the engine cancels the attempt or the worker shuts down (``cancel``); a
        #: ``multiprocessing`` manager's event in a process pool's child
        self.cancelled: Any = threading.Event()
        #: why: "cancelled" (the engine: the workflow gave up on it, or the attempt is not current)
        #: or "worker_shutdown"
        self.cancel_reason: str | None = None
        self._last_sent = 0.0
        self._lock = threading.Lock()
        self._pending: tuple[Any, ...] | None = None
        self._timer: threading.Timer | None = None
        self._closed = False
        #: what the attempt published (``publish``), sent with its completion; None where the
        #: attempt has no completion of its own to carry it (a local activity, a process pool's child)
        self.published: PublishBuffer | None = None
        self.encode: Callable[[Any], bytes] | None = None
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

    def publish(self, stream: str, value: Any) -> None:
        name = check_stream(stream)
        if self.published is None or self.encode is None:
            raise KadenceError(
                "activity.publish() works in activities a Worker runs on its own loop or threads: a local "
                "activity's or a process pool's attempt has no completion of its own to carry the values "
                "(publish from the workflow with workflow.publish() instead)"
            )
        check_streams_writable()
        data = self.encode(value)
        with self._lock:
            self.published.add(name, data)

    def close(self) -> None:
        """The attempt is over: no more heartbeats."""
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def on_cancel(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` when the attempt is cancelled (at once if it was)."""
        with self._lock:
            if not self.cancelled.is_set():
                self._on_cancel.append(callback)
                return
        callback()

    def cancel(self, reason: str = "cancelled") -> None:
        with self._lock:
            if self.cancelled.is_set():
                return
            self.cancel_reason = reason
            self.cancelled.set()
            callbacks = list(self._on_cancel)
        for cb in callbacks:
            cb()


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
    channel through which the engine's cancellation reaches the activity: an async activity is
    cancelled (``asyncio.CancelledError`` at its next ``await``, and from ``heartbeat()`` itself
    once cancelled), a sync one sees ``is_cancelled()`` become true."""
    ctx = _context()
    if ctx.is_async and ctx.cancelled.is_set():
        raise asyncio.CancelledError(f"activity {ctx.info.activity_type} was cancelled ({ctx.cancel_reason})")
    ctx.heartbeat(list(details) if len(details) != 1 else details[0])


def publish(stream: str, value: Any) -> None:
    """Publish ``value`` on the workflow's stream ``stream`` (``handle.stream(stream)`` reads it),
    exactly once: the values go with this attempt's result and are written only if the engine
    accepts it. A failed, timed-out or retried attempt's values are never read; the attempt
    that completes publishes all of its own (768 KiB in all, 256 KiB a value)."""
    _context().publish(stream, value)


def is_cancelled() -> bool:
    """True once this attempt should stop: the engine said so (the workflow gave up on it, or it
    is no longer the current attempt; it learns that from a heartbeat's reply), or the worker
    running it is shutting down (``is_worker_shutdown()``)."""
    return bool(_context().cancelled.is_set())


def is_worker_shutdown() -> bool:
    """True once the worker running this attempt is shutting down (the attempt is cancelled; its
    task goes to another worker unless it completes within the graceful shutdown timeout)."""
    return _context().cancel_reason == "worker_shutdown"


async def wait_for_cancelled() -> None:
    """In an async activity: wait until the attempt is cancelled (``is_cancelled()``)."""
    ctx = _context()
    loop = asyncio.get_running_loop()
    cancelled = asyncio.Event()
    ctx.on_cancel(lambda: loop.call_soon_threadsafe(cancelled.set))
    await cancelled.wait()


def wait_for_cancelled_sync(timeout: float | None = None) -> bool:
    """In a sync activity (a thread, or a process pool's child): block until the attempt is
    cancelled or ``timeout`` seconds pass; True if it was cancelled."""
    return bool(_context().cancelled.wait(timeout))


class _ActivityLogger(logging.LoggerAdapter[logging.Logger]):
    """Adds the activity's workflow ID, run ID, activity ID and attempt to its records."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        ctx = _current.get()
        if ctx is None:
            return msg, kwargs
        i = ctx.info
        extra = {
            "workflow_id": i.workflow_id,
            "run_id": i.run_id,
            "activity_id": i.activity_id,
            "activity_type": i.activity_type,
            "attempt": i.attempt,
        }
        kwargs["extra"] = {**extra, **kwargs.get("extra", {})}
        return f"[{i.activity_type} {i.workflow_id} {i.activity_id} attempt {i.attempt}] {msg}", kwargs


#: a standard logging adapter for activity code: each line names the activity and its attempt
logger = _ActivityLogger(logging.getLogger("kadence.activity"), {})
