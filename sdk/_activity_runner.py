"""A worker's activity attempts: each one run with its context (heartbeats, cancellation), its
outcome turned into the command that reports it, every failure logged, and all of them
cancelled, and waited for, when the worker shuts down."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures as cf
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from kadence.schemas.records import ActivityTask
from kadence.topics.errors import KadenceError
from kadence.topics.payload import PayloadConverter
from kadence.topics.streams import PublishBuffer

from . import activity as _activity
from ._definitions import ActivityDefinition
from ._executors import DaemonThreadPool, SyncActivityCalls
from ._worker_metrics import QueueMetrics, _NoMetrics
from .interceptors import Interceptor, invoke_activity

__all__ = ["ActivityRunner"]

log = logging.getLogger(__name__)


def _dropped_published(task: ActivityTask, count: int) -> None:
    """An attempt that will be completed asynchronously published ``count`` values: they are
    dropped (its completion comes from elsewhere, without them), said once in the log."""
    if count:
        log.warning(
            "activity %s (%s) attempt %d: %d published values dropped: an activity completed "
            "asynchronously publishes nothing (its completion comes from elsewhere)",
            task["activity_type"],
            task["activity_id"],
            task["attempt"],
            count,
        )


class ActivityRunner:
    """Runs the activity attempts of one worker. Sync activities run in ``executor`` (the
    user's), or in a pool of daemon threads the runner owns (``_executors``)."""

    def __init__(
        self,
        activities: Mapping[str, ActivityDefinition],
        converter: PayloadConverter,
        interceptors: tuple[Interceptor, ...],
        *,
        executor: cf.Executor | None,
        max_concurrent: int,
        metrics: QueueMetrics | _NoMetrics,
        stats: collections.Counter[str],
        identity: str,
        where: str,
    ) -> None:
        self.activities = activities
        self.converter = converter
        self.interceptors = interceptors
        self._owned = executor is None
        self.executor: cf.Executor = executor or DaemonThreadPool(
            min(64, max_concurrent), thread_name_prefix="kadence-activity"
        )
        self.calls = SyncActivityCalls(self.executor)
        self.metrics = metrics
        self.stats = stats
        self.identity = identity
        self._where = where
        #: the attempts running now (``shutdown`` cancels them)
        self._running: dict[_activity.ActivityContext, asyncio.Task[Any]] = {}
        self._idle = asyncio.Event()

    async def run(
        self, task: ActivityTask, heartbeat: Callable[[ActivityTask, _activity.ActivityContext, Any], None]
    ) -> tuple[str, dict[str, Any]] | None:
        """Run one attempt: the command that reports it (``RespondActivityTaskCompleted`` /
        ``...Failed`` and its body), or None when the engine cancelled it or it will be completed
        asynchronously (``activity.raise_complete_async``): nothing to report.
        ``asyncio.CancelledError`` when the worker shut down under it (its task is not
        acknowledged: another worker runs it)."""
        common: dict[str, Any] = {
            "activity_id": task["activity_id"],
            "scheduled_seq": task["scheduled_seq"],
            "attempt": task["attempt"],
            "identity": self.identity,
        }
        defn = self.activities.get(task["activity_type"])
        info = _activity.info_from_task(task, self.converter)
        me = asyncio.current_task()
        assert me is not None, "activities run in a task of the worker's loop"
        loop = asyncio.get_running_loop()
        is_async = defn is not None and defn.is_async
        ctx = _activity.ActivityContext(
            info,
            lambda c, details: heartbeat(task, c, details),
            (lambda: loop.call_soon_threadsafe(me.cancel)) if is_async else (lambda: None),
            is_async=is_async,
        )
        ctx.published, ctx.encode = PublishBuffer(), self.converter.to_bytes
        token = _activity._current.set(ctx)
        self._running[ctx] = me
        self._idle.clear()
        self.metrics.activity_started(
            task["activity_type"], task["attempt"], time.time() - task["scheduled_time_ms"] / 1000
        )
        began, outcome = time.perf_counter(), "interrupted"  # unless it ends one of the ways below
        try:
            if defn is None:
                raise KadenceError(f"activity type {task['activity_type']!r} is not registered on {self._where}")
            args = self.converter.args_from_bytes(task["input"], defn.fn, what=f"activity {defn.name}")
            result = await invoke_activity(
                self.interceptors, defn, info, args, lambda fn, a: self.calls.call(fn, tuple(a))
            )
            self.stats["activities_completed"] += 1
            outcome = "completed"
            return "RespondActivityTaskCompleted", {
                **common,
                "result": self.converter.to_bytes(result),
                "eager_workflow_task": None,
                "published": ctx.published.items,
            }
        except _activity.CompleteAsyncError:
            _dropped_published(task, len(ctx.published.items))
            self.stats["activities_completing_async"] += 1
            outcome = "completing_async"
            return None  # completed later, by an AsyncActivityHandle: nothing to report now
        except asyncio.CancelledError:
            if ctx.cancel_reason != "cancelled":
                raise  # worker shutting down: the task is redelivered to another worker
            self.stats["activities_cancelled"] += 1
            outcome = "cancelled"
            return None  # the engine no longer waits for this attempt
        except Exception as exc:
            if ctx.cancel_reason == "worker_shutdown":
                raise asyncio.CancelledError("worker shutdown") from exc  # ended by the shutdown
            self.stats["activities_failed"] += 1
            outcome = "failed"
            log.warning(
                "activity %s (%s) attempt %d failed: %s",
                task["activity_type"],
                task["activity_id"],
                task["attempt"],
                type(exc).__name__,
            )
            return "RespondActivityTaskFailed", {**common, "failure": self.converter.failure(exc)}
        finally:
            ctx.close()
            _activity._current.reset(token)
            self._running.pop(ctx, None)
            if not self._running:
                self._idle.set()
            self.metrics.activity_ended(task["activity_type"], outcome, time.perf_counter() - began)

    async def shutdown(self, graceful_timeout: float) -> None:
        """Cancel every running attempt (async ones get ``CancelledError``, sync ones see
        ``activity.is_cancelled()``), wait up to ``graceful_timeout`` seconds for them to end,
        then leave the rest: their threads are daemons and their tasks are redelivered."""
        running = list(self._running.items())
        for ctx, _task in running:
            ctx.cancel("worker_shutdown")
        if running:
            try:
                await asyncio.wait_for(self._idle.wait(), graceful_timeout)
            except TimeoutError:
                left = [c.info for c in self._running]
                log.warning(
                    "worker %s: %d activities still running after the %.1f s graceful shutdown timeout, "
                    "abandoned (their tasks go to another worker): %s",
                    self.identity,
                    len(left),
                    graceful_timeout,
                    ", ".join(f"{i.activity_type} ({i.workflow_id}, {i.activity_id})" for i in left[:5]),
                )
                for task in self._running.values():
                    task.cancel()
        self.calls.close()
        if self._owned:
            self.executor.shutdown(wait=False, cancel_futures=True)

    def close_unstarted(self) -> None:
        """The worker stopped before it ran anything."""
        self.calls.close()
        if self._owned:
            self.executor.shutdown(wait=False)
