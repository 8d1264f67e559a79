"""Where a worker runs sync activities: its own pool of daemon threads by default, or the
executor the user passes (``Worker(activity_executor=...)``): a ``ThreadPoolExecutor``, or a
``ProcessPoolExecutor`` for CPU-bound activities, whose child processes heartbeat and see
cancellation through a ``multiprocessing`` manager.

Written by hand, and why: ``concurrent.futures.ThreadPoolExecutor`` joins its threads when the
interpreter exits (since Python 3.9 it registers that join with ``threading``), so one sync
activity that ignores its cancellation keeps a stopped worker's process alive for ever (issue 44:
"the process cannot exit"). Python offers no way to stop a thread; a daemon thread at least lets
the process end once the worker has given the activity its graceful shutdown timeout.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextvars
import itertools
import logging
import multiprocessing
import queue
import threading
from collections.abc import Callable
from multiprocessing.managers import SyncManager
from typing import Any

from . import activity as _activity

__all__ = ["DaemonThreadPool", "SyncActivityCalls"]

log = logging.getLogger(__name__)


class DaemonThreadPool(cf.Executor):
    """Up to ``max_workers`` daemon threads, started as work arrives and kept for the next."""

    def __init__(self, max_workers: int, thread_name_prefix: str) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be >= 1")
        self._max = max_workers
        self._prefix = thread_name_prefix
        self._work: queue.SimpleQueue[tuple[cf.Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._shutdown = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future[Any]:
        fut: cf.Future[Any] = cf.Future()
        call = (lambda: fn(*args, **kwargs)) if kwargs else None
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new work after shutdown")
            self._work.put((fut, call or fn, () if call else args))
            if self._idle == 0 and len(self._threads) < self._max:
                t = threading.Thread(target=self._serve, name=f"{self._prefix}_{len(self._threads)}", daemon=True)
                self._threads.append(t)
                t.start()
            else:
                self._idle -= 1
        return fut

    def _serve(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            fut, fn, args = item
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn(*args))
                except BaseException as exc:  # noqa: BLE001 - the caller's future carries it
                    fut.set_exception(exc)
            with self._lock:
                self._idle += 1

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            threads = list(self._threads)
        if cancel_futures:
            while True:
                try:
                    item = self._work.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in threads:
            self._work.put(None)
        if wait:
            for t in threads:
                t.join()


class SyncActivityCalls:
    """Runs sync activity functions in an executor, with the activity's context available to
    them: copied into a thread, or rebuilt in a child process (heartbeats and cancellation cross
    through a manager's queue and events)."""

    def __init__(self, executor: cf.Executor) -> None:
        self.executor = executor
        self._process = isinstance(executor, cf.ProcessPoolExecutor)
        self._manager: SyncManager | None = None
        self._heartbeats: Any = None
        self._contexts: dict[int, _activity.ActivityContext] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()

    async def call(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        loop = asyncio.get_running_loop()
        if not self._process:
            return await loop.run_in_executor(self.executor, contextvars.copy_context().run, fn, *args)
        ctx = _activity._current.get()
        if ctx is None:  # a local activity: no heartbeats, no cancellation from the engine
            return await loop.run_in_executor(self.executor, fn, *args)
        manager = self._start_manager()
        key = next(self._ids)
        cancelled = manager.Event()
        with self._lock:
            self._contexts[key] = ctx
        ctx.on_cancel(cancelled.set)
        try:
            return await loop.run_in_executor(
                self.executor, _in_child, fn, args, ctx.info, key, self._heartbeats, cancelled
            )
        finally:
            with self._lock:
                self._contexts.pop(key, None)

    def _start_manager(self) -> SyncManager:
        with self._lock:
            if self._manager is None:
                self._manager = multiprocessing.Manager()
                self._heartbeats = self._manager.Queue()
                threading.Thread(target=self._relay, name="kadence-activity-heartbeats", daemon=True).start()
            return self._manager

    def _relay(self) -> None:
        """Heartbeats from child processes, to their attempts' contexts (and so to the engine)."""
        while True:
            try:
                item = self._heartbeats.get()
            except (EOFError, OSError):  # the manager stopped
                return
            if item is None:
                return
            key, details = item
            with self._lock:
                ctx = self._contexts.get(key)
            if ctx is not None:
                ctx.heartbeat(details)

    def close(self) -> None:
        with self._lock:
            manager, self._manager = self._manager, None
        if manager is not None:
            try:
                self._heartbeats.put(None)
            except (EOFError, OSError):
                pass
            manager.shutdown()


def _in_child(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    info: _activity.ActivityInfo,
    key: int,
    heartbeats: Any,
    cancelled: Any,
) -> Any:
    """In a ``ProcessPoolExecutor``'s child: the activity's context, then the activity."""
    ctx = _activity.ActivityContext(info, lambda _c, details: heartbeats.put((key, details)), lambda: None)
    ctx.interval = 0.0  # the parent's context throttles what reaches the engine
    ctx.cancelled = cancelled  # a manager Event: set by the parent when the engine or the worker cancels
    token = _activity._current.set(ctx)
    try:
        return fn(*args)
    finally:
        ctx.close()
        _activity._current.reset(token)
