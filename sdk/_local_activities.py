"""Local activities (decision 0043): how a worker, or the test environment, runs the ones a
workflow task waits for. One place for both: the attempts, their timeouts and retries, and
handing the outcomes to the workflow instance until it waits for something else."""

from __future__ import annotations

import asyncio
import collections
import contextvars
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kadence.schemas.records import WorkflowTask
from kadence.topics.errors import ApplicationError
from kadence.topics.payload import PayloadConverter
from kadence.topics.records import now_ms

from . import activity as _activity
from ._instance import LocalActivityCall, WorkflowInstance
from ._worker_metrics import QueueMetrics, _NoMetrics
from .interceptors import Interceptor, invoke_activity

if TYPE_CHECKING:
    from ._definitions import RetryPolicy
    from ._worker import Worker

__all__ = ["run_local_activities", "run_local_activity", "worker_local_activity"]


async def run_local_activities(
    inst: WorkflowInstance, run_one: Callable[[LocalActivityCall], Awaitable[tuple[Any, ...]]]
) -> None:
    """Run the local activities ``inst`` waits for (those called together run together), give it
    their outcomes, and again, until it waits for something else."""
    while True:
        pending = inst.pending_local_activities()
        if not pending:
            return
        outcomes = await asyncio.gather(*(run_one(call) for call in pending))
        inst.resolve_local_activities(list(outcomes))


async def run_local_activity(
    call: LocalActivityCall,
    wt: WorkflowTask,
    *,
    headers: Mapping[str, str],
    activities: dict[str, Any],
    converter: PayloadConverter,
    interceptors: Iterable[Interceptor],
    call_sync: Callable[[Callable[..., Any], tuple[Any, ...]], Awaitable[Any]] | None,
    task_queue: str,
    where: str,
    metrics: QueueMetrics | _NoMetrics,
    stats: collections.Counter[str],
) -> tuple[Any, ...]:
    """One local activity with its retries, for the workflow task ``wt``: (call, result payload,
    None) or (call, None, failure). ``headers``: the run's (its start's), as an activity's. ``call_sync`` runs a sync activity (the worker's executor; None: the loop's default);
    ``where`` names the runner in an error for an unregistered activity."""
    policy, options = call.options["retry_policy"], call.options
    defn = activities.get(call.activity_type)
    deadline = (
        time.monotonic() + options["schedule_to_close_timeout_ms"] / 1000
        if options.get("schedule_to_close_timeout_ms")
        else None
    )
    attempt = 0
    while True:
        attempt += 1
        info = _info(call, wt, task_queue, attempt, headers)
        ctx = _activity.ActivityContext(info, lambda _c, _d: None, lambda: None)
        token = _activity._current.set(ctx)
        metrics.activity_started(call.activity_type, attempt, None)
        began, outcome = time.perf_counter(), "failed"
        try:
            if defn is None:
                raise ApplicationError(
                    f"activity type {call.activity_type!r} is not registered on {where}",
                    type="ActivityNotRegistered",
                    non_retryable=True,
                )
            timeout = options["start_to_close_timeout_ms"] / 1000
            if deadline is not None:
                timeout = max(0.0, min(timeout, deadline - time.monotonic()))
            result = await asyncio.wait_for(_invoke(call, defn, info, converter, interceptors, call_sync), timeout)
            outcome = "completed"
            stats["local_activities_completed"] += 1
            return call, converter.to_bytes(result), None
        except TimeoutError:
            exc: Exception = ApplicationError(
                f"local activity {call.activity_type} attempt {attempt} timed out", type="LocalActivityTimeout"
            )
        except asyncio.CancelledError:
            outcome = "interrupted"
            raise
        except Exception as err:  # noqa: BLE001 - any error of the activity is its outcome
            exc = err
        finally:
            ctx.close()
            _activity._current.reset(token)
            metrics.activity_ended(call.activity_type, outcome, time.perf_counter() - began)
        failure = converter.failure(exc)
        delay = _retry_delay(policy, failure, attempt, deadline)
        if delay is None:
            stats["local_activities_failed"] += 1
            return call, None, failure
        await asyncio.sleep(delay)


async def _invoke(
    call: LocalActivityCall,
    defn: Any,
    info: _activity.ActivityInfo,
    converter: PayloadConverter,
    interceptors: Iterable[Interceptor],
    call_sync: Callable[[Callable[..., Any], tuple[Any, ...]], Awaitable[Any]] | None,
) -> Any:
    """One attempt's call: the arguments typed by the activity's signature (as a task's would
    be), through the interceptors; a sync activity on ``call_sync`` (else the loop's executor)."""
    args = converter.args_from_bytes(converter.to_bytes(list(call.args)), defn.fn, what=f"local activity {defn.name}")
    loop = asyncio.get_running_loop()
    run_sync = (
        (lambda fn, a: call_sync(fn, tuple(a)))
        if call_sync is not None
        else (lambda fn, a: loop.run_in_executor(None, contextvars.copy_context().run, fn, *a))
    )
    return await invoke_activity(interceptors, defn, info, args, run_sync)


def _info(
    call: LocalActivityCall, wt: WorkflowTask, task_queue: str, attempt: int, headers: Mapping[str, str]
) -> _activity.ActivityInfo:
    """``activity.info()`` of a local activity's attempt."""
    return _activity.ActivityInfo(
        workflow_id=wt["workflow_id"],
        run_id=wt["run_id"],
        workflow_type=wt["workflow_type"],
        activity_id=f"local:{call.activity_id}",
        activity_type=call.activity_type,
        task_queue=task_queue,
        attempt=attempt,
        idempotency_key=f"{wt['run_id']}:local:{call.activity_id}",
        scheduled_time_ms=now_ms(),
        headers=dict(headers),
    )


def _retry_delay(policy: RetryPolicy, failure: Mapping[str, Any], attempt: int, deadline: float | None) -> float | None:
    """Seconds until the next attempt after ``attempt`` failed with ``failure``, or None when it
    was the last (not retryable, out of attempts, or past the schedule-to-close deadline)."""
    delay = policy.initial_interval.total_seconds() * policy.backoff_coefficient ** (attempt - 1)
    if policy.maximum_interval is not None:
        delay = min(delay, policy.maximum_interval.total_seconds())
    if (
        failure.get("non_retryable")
        or failure["type"] in policy.non_retryable_error_types
        or (policy.maximum_attempts and attempt >= policy.maximum_attempts)
        or (deadline is not None and time.monotonic() + delay >= deadline)
    ):
        return None
    return delay


async def worker_local_activity(
    worker: Worker, wt: WorkflowTask, call: LocalActivityCall, headers: Mapping[str, str]
) -> tuple[Any, ...]:
    """One local activity of ``worker``'s workflow task (or of an eager start's first task), run
    with the worker's activities, interceptors, runner and metrics."""
    return await run_local_activity(
        call,
        wt,
        headers=headers,
        activities=worker._activities,
        converter=worker.client.converter,
        interceptors=worker.interceptors,
        call_sync=worker._activity_runner.calls.call,
        task_queue=worker.task_queue,
        where=f"worker {worker.identity} (task queue {worker.task_queue})",
        metrics=worker.metrics,
        stats=worker.stats,
    )
