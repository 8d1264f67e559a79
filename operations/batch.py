"""Batch operations: signal, cancel, terminate, pause, unpause or reset every run a visibility
filter matches, as a Kadence workflow (``kadence.Batch`` on the task queue ``kadence-batch``).

Why a workflow: it is durable and resumable for free. The batch walks the visibility projection
page by page (a cursor that stays valid while the operation changes the runs it passed), and
each page is one activity that sends one command per run with the request ID
``batch:{batch ID}:{workflow ID}``. A worker killed halfway has its activity retried with the same
request IDs, which the engine answers as the first time: every run is acted on once however
often a page is sent. Progress (total, done, succeeded, failed with the reasons) is the workflow's
``progress`` query, and its result when it ends; a long batch continues as new every
``pages_per_run`` pages (default 50, each about 7 events) so its history stays small. Batches never act on batches.

The activities need a ``Client`` (to send the commands) and the visibility projection's Redis:
``batch_activities(client, redis_url)`` builds them; ``kadence batch worker`` (and ``kadence dev``)
runs them with the workflow.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kadence import Client, KadenceError, RetryPolicy, WorkflowError, WorkflowHandle, activity, workflow
from kadence.readmodels.visibility import VisibilityFilter
from kadence.topics.batch import (
    BATCH_OPERATIONS,
    BATCH_TASK_QUEUE,
    BATCH_WORKFLOW_TYPE,
    FAILURES_KEPT,
    BatchFilter,
    BatchProgress,
    BatchRequest,
)

__all__ = [
    "BATCH_OPERATIONS",
    "BATCH_TASK_QUEUE",
    "BATCH_WORKFLOW_TYPE",
    "FAILURES_KEPT",
    "Batch",
    "BatchFilter",
    "BatchProgress",
    "BatchRequest",
    "batch_activities",
    "request_id",
]


@dataclass
class _Page:
    workflow_ids: list[str]
    cursor: str | None


@dataclass
class _Applied:
    succeeded: int
    failures: list[dict[str, str]]


#: commands of one page in flight at once
CONCURRENCY = 32
_T = timedelta(minutes=10)
#: a page's activity heartbeats after each command: a worker that died is noticed this soon
_HEARTBEAT = timedelta(seconds=15)
_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))


@workflow.defn(name=BATCH_WORKFLOW_TYPE)
class Batch:
    def __init__(self) -> None:
        self._progress = BatchProgress()

    @workflow.query
    def progress(self) -> BatchProgress:
        return self._progress

    @workflow.run
    async def run(self, request: BatchRequest, progress: BatchProgress | None = None) -> BatchProgress:
        p = self._progress = progress or BatchProgress(operation=request.operation)
        if p.total is None:
            p.total = await workflow.execute_activity(
                "kadence.batch.count", request.filter, start_to_close_timeout=_T, retry_policy=_RETRY, result_type=int
            )
        for _ in range(request.pages_per_run):
            page = await workflow.execute_activity(
                "kadence.batch.page",
                request.filter,
                p.cursor,
                request.page_size,
                start_to_close_timeout=_T,
                retry_policy=_RETRY,
                result_type=_Page,
            )
            if page.workflow_ids:
                applied = await workflow.execute_activity(
                    "kadence.batch.apply",
                    request,
                    workflow.info().workflow_id,
                    page.workflow_ids,
                    start_to_close_timeout=_T,
                    heartbeat_timeout=_HEARTBEAT,
                    retry_policy=_RETRY,
                    result_type=_Applied,
                )
                p.done += len(page.workflow_ids)
                p.succeeded += applied.succeeded
                p.failed += len(applied.failures)
                p.failures = (p.failures + applied.failures)[:FAILURES_KEPT]
            p.cursor = page.cursor
            if p.cursor is None:
                p.finished = True
                return p
        workflow.continue_as_new(request, p)
        raise AssertionError("unreachable")  # continue_as_new does not return


def _query(f: BatchFilter) -> VisibilityFilter:
    return VisibilityFilter(
        workflow_type=f.workflow_type,
        status=f.status,
        search=dict(f.search) or None,
        paused=f.paused,
        start_from_ms=f.start_from_ms,
        start_to_ms=f.start_to_ms,
    )


def request_id(batch_id: str, workflow_id: str) -> str:
    """The request ID of the batch's command for one run: a resent page is answered, not redone."""
    return f"batch:{batch_id}:{workflow_id}"


def batch_activities(client: Client, redis_url: str) -> list[Callable[..., Any]]:
    """The batch's activities, bound to ``client`` (commands) and the visibility projection's Redis."""
    import redis.asyncio as aioredis

    from kadence.readmodels.visibility import VisibilityReader

    namespace = client.config.namespace

    def reader() -> tuple[Any, VisibilityReader]:
        redis = aioredis.from_url(redis_url, socket_timeout=10, socket_connect_timeout=5)
        return redis, VisibilityReader(redis, namespace)

    @activity.defn(name="kadence.batch.count")
    async def count(f: BatchFilter) -> int:
        redis, r = reader()
        try:
            counted = await r.count(_query(f))
        finally:
            await redis.aclose()
        total: int = counted["total"] - counted["by_type"].get(BATCH_WORKFLOW_TYPE, 0)
        return total

    @activity.defn(name="kadence.batch.page")
    async def page(f: BatchFilter, cursor: str | None, page_size: int) -> _Page:
        redis, r = reader()
        try:
            items, nxt = await r.list(_query(f), page_size=page_size, cursor=cursor)
        finally:
            await redis.aclose()
        # never the batches themselves (a batch terminate of everything running would end itself)
        return _Page(
            workflow_ids=[i["workflow_id"] for i in items if i["workflow_type"] != BATCH_WORKFLOW_TYPE], cursor=nxt
        )

    @activity.defn(name="kadence.batch.apply")
    async def apply(request: BatchRequest, batch_id: str, workflow_ids: list[str]) -> _Applied:
        gate = asyncio.Semaphore(CONCURRENCY)
        failures: list[dict[str, str]] = []
        done = 0

        async def one(wf: str) -> None:
            nonlocal done
            rid = request_id(batch_id, wf)
            handle = client.get_workflow_handle(wf)
            async with gate:
                try:
                    await _send(handle, request, rid)
                except WorkflowError as exc:  # not found, closed, refused: the run's answer, kept
                    failures.append({"workflow_id": wf, "error": str(exc)})
                done += 1
                activity.heartbeat(done)

        # a broker that does not answer raises out of gather: the activity is retried, same request IDs
        await asyncio.gather(*(one(wf) for wf in workflow_ids))
        failures.sort(key=lambda x: x["workflow_id"])
        return _Applied(succeeded=len(workflow_ids) - len(failures), failures=failures)

    return [count, page, apply]


async def _send(handle: WorkflowHandle, request: BatchRequest, rid: str) -> None:
    op, reason = request.operation, request.reason or f"batch {request.operation}"
    if op == "signal":
        await handle.signal(request.signal_name, *request.signal_args, request_id=rid)
    elif op == "cancel":
        await handle.cancel(reason=reason, request_id=rid)
    elif op == "terminate":
        await handle.terminate(reason=reason, request_id=rid)
    elif op == "pause":
        await handle.pause(reason=reason, request_id=rid)
    elif op == "unpause":
        await handle.unpause(reason=reason, request_id=rid)
    elif op == "reset":
        await handle.reset(reason=reason, request_id=rid)
    else:  # pragma: no cover - BatchRequest.check refuses it before the batch starts
        raise KadenceError(f"unknown batch operation {op!r}")
