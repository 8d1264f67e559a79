"""The workflow API: what workflow code may call.

Workflow code runs on a deterministic loop and must reach time, randomness, UUIDs and I/O only
through this module, so that every value it depends on is in the history::

    from datetime import timedelta
    from kadence import workflow

    @workflow.defn
    class Greet:
        @workflow.run
        async def run(self, name: str) -> str:
            return await workflow.execute_activity(
                say_hello, name, start_to_close_timeout=timedelta(seconds=10))
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random as _random
import uuid as _uuid
from collections.abc import Awaitable, Callable, Generator, Iterable, MutableMapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, ParamSpec, Protocol, TypeVar, overload

from kadence.topics.errors import InvalidArgumentError, KadenceError
from kadence.topics.search_attributes import SearchAttributeValue, check_search_attributes, from_wire
from kadence.topics.streams import check_stream, check_streams_writable, check_value

from ._definitions import Limit, Priority, RetryPolicy, limit_records, priority_record, to_ms, workflow_definition
from ._instance import ContinueAsNew, WorkflowInfo, WorkflowInstance
from ._loop import DeterministicLoop

_C = TypeVar("_C", bound=type)
_F = TypeVar("_F", bound=Callable[..., Any])
_P = ParamSpec("_P")
_R = TypeVar("_R")
_R_co = TypeVar("_R_co", covariant=True)

__all__ = [
    "ChildWorkflowHandle",
    "ContinueAsNew",
    "UpdateHandler",
    "WorkflowInfo",
    "all_handlers_finished",
    "continue_as_new",
    "defn",
    "deprecate_patch",
    "execute_activity",
    "execute_activity_method",
    "execute_child_workflow",
    "execute_local_activity",
    "execute_local_activity_method",
    "info",
    "is_replaying",
    "logger",
    "now",
    "patched",
    "publish",
    "query",
    "random",
    "run",
    "signal",
    "sleep",
    "sleep_until",
    "start_child_workflow",
    "update",
    "upsert_search_attributes",
    "uuid4",
    "wait_condition",
]


@overload
def defn(cls: _C, *, name: str | None = None, failure_exception_types: Sequence[type[BaseException]] = ()) -> _C: ...


@overload
def defn(
    cls: None = None, *, name: str | None = None, failure_exception_types: Sequence[type[BaseException]] = ()
) -> Callable[[_C], _C]: ...


def defn(
    cls: _C | None = None, *, name: str | None = None, failure_exception_types: Sequence[type[BaseException]] = ()
) -> _C | Callable[[_C], _C]:
    """Class decorator: a workflow definition (``name`` defaults to the class name).

    An exception raised out of the workflow's code fails the *run* when it is a ``FailureError``
    (``ApplicationError``, ``ActivityError``, ``ChildWorkflowError`` ...) or one of
    ``failure_exception_types``; anything else is a bug: it fails the workflow *task*, and the run
    stays open, its task retried with backoff, until a worker with fixed code runs it."""

    def wrap(c: _C) -> _C:
        setattr(c, "__kadence_workflow__", workflow_definition(c, name, failure_exception_types))
        for member in vars(c).values():
            if getattr(member, "__kadence_run__", False):
                setattr(member, "__kadence_owner__", c)
        return c

    return wrap(cls) if cls is not None else wrap


def run(fn: _F) -> _F:
    """Method decorator: the workflow's entry point (an ``async def``)."""
    setattr(fn, "__kadence_run__", True)
    return fn


@overload
def signal(fn: _F, *, name: str | None = None) -> _F: ...


@overload
def signal(fn: None = None, *, name: str | None = None) -> Callable[[_F], _F]: ...


def signal(fn: _F | None = None, *, name: str | None = None) -> _F | Callable[[_F], _F]:
    """Method decorator: a signal handler (sync or async). Signals are recorded in history in
    arrival order and delivered to the handler in that order."""

    def wrap(f: _F) -> _F:
        setattr(f, "__kadence_signal__", name or f.__name__)
        return f

    return wrap(fn) if fn is not None else wrap


@overload
def query(fn: _F, *, name: str | None = None) -> _F: ...


@overload
def query(fn: None = None, *, name: str | None = None) -> Callable[[_F], _F]: ...


def query(fn: _F | None = None, *, name: str | None = None) -> _F | Callable[[_F], _F]:
    """Method decorator: a query handler. Must be a plain (non-async) method that only reads."""

    def wrap(f: _F) -> _F:
        if asyncio.iscoroutinefunction(f):
            raise KadenceError(f"query handler {f.__name__} must not be async")
        setattr(f, "__kadence_query__", name or f.__name__)
        return f

    return wrap(fn) if fn is not None else wrap


class UpdateHandler(Protocol[_P, _R_co]):
    """What ``@workflow.update`` makes of a method: the method itself, with a ``validator``
    decorator whose method takes the handler's parameters (``self`` included)."""

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R_co: ...

    def validator(self, check: Callable[_P, None]) -> Callable[_P, None]: ...


@overload
def update(fn: Callable[_P, _R], *, name: str | None = None) -> UpdateHandler[_P, _R]: ...
@overload
def update(fn: None = None, *, name: str | None = None) -> Callable[[Callable[_P, _R]], UpdateHandler[_P, _R]]: ...
def update(fn: Callable[..., Any] | None = None, *, name: str | None = None) -> Any:
    """Method decorator: an update handler (sync or async). Its return value is the caller's
    result (``handle.execute_update``); an exception it raises is the caller's error, and the
    run goes on. It may wait for activities, timers and conditions like the run method.

    ``@handler.validator`` names a plain method, with the handler's parameters, that runs before
    the update is accepted and raises to reject it; a rejected update writes nothing to history::

        @workflow.update
        async def add_item(self, sku: str) -> int:
            self.items.append(sku)
            return len(self.items)

        @add_item.validator
        def _check_item(self, sku: str) -> None:
            if not sku:
                raise ValueError("an item needs a SKU")
    """

    def wrap(f: Callable[..., Any]) -> Any:
        setattr(f, "__kadence_update__", name or f.__name__)

        def validator(v: Callable[..., Any]) -> Callable[..., Any]:
            if asyncio.iscoroutinefunction(v):
                raise KadenceError(f"update validator {v.__name__} must not be async")
            setattr(f, "__kadence_update_validator__", v)
            return v

        setattr(f, "validator", validator)
        return f

    return wrap(fn) if fn is not None else wrap


def _instance() -> WorkflowInstance:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if not isinstance(loop, DeterministicLoop) or not isinstance(loop.owner, WorkflowInstance):
        raise KadenceError("this function can only be called from workflow code run by a Worker")
    return loop.owner


@overload
def execute_activity(
    activity: Callable[..., Awaitable[_R]],
    *args: Any,
    task_queue: str | None = None,
    start_to_close_timeout: timedelta | None = None,
    schedule_to_close_timeout: timedelta | None = None,
    schedule_to_start_timeout: timedelta | None = None,
    heartbeat_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    result_type: Any = None,
    concurrency: Iterable[Limit] | None = None,
    priority: Priority | int | None = None,
) -> asyncio.Future[_R]: ...
@overload
def execute_activity(
    activity: Callable[..., Any] | str,
    *args: Any,
    task_queue: str | None = None,
    start_to_close_timeout: timedelta | None = None,
    schedule_to_close_timeout: timedelta | None = None,
    schedule_to_start_timeout: timedelta | None = None,
    heartbeat_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    result_type: Any = None,
    concurrency: Iterable[Limit] | None = None,
    priority: Priority | int | None = None,
) -> asyncio.Future[Any]: ...
def execute_activity(
    activity: Callable[..., Any] | str,
    *args: Any,
    task_queue: str | None = None,
    start_to_close_timeout: timedelta | None = None,
    schedule_to_close_timeout: timedelta | None = None,
    schedule_to_start_timeout: timedelta | None = None,
    heartbeat_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    result_type: Any = None,
    concurrency: Iterable[Limit] | None = None,
    priority: Priority | int | None = None,
) -> asyncio.Future[Any]:
    """Schedule an activity and return an awaitable of its result.

    ``priority`` (a ``Priority``, or a level 1-5): how its tasks are ordered when the queue has
    a backlog; fields left unset are the run's (docs/guide.md, "Priority and fairness").

    ``concurrency`` (``[Limit("api", "stripe", max=5)]``): the activity holds a slot of each
    limit from its first attempt to its close (across its retries); its attempts wait for them
    (docs/guide.md, "Concurrency limits"). The wait is not an attempt: only the
    schedule-to-close timeout counts it.

    The result is typed by the activity function's return type; ``result_type`` types it when
    the activity is given by name (or overrides the function's). A failure reaches the workflow
    as ``ActivityError`` with the activity's error as its cause.
    """
    inst = _instance()
    activity_type, result_fn = _activity_type(activity, result_type)
    options = {
        "task_queue": task_queue or inst.info.task_queue,
        "schedule_to_close_timeout_ms": to_ms(schedule_to_close_timeout),
        "schedule_to_start_timeout_ms": to_ms(schedule_to_start_timeout),
        "start_to_close_timeout_ms": to_ms(start_to_close_timeout),
        "heartbeat_timeout_ms": to_ms(heartbeat_timeout),
        "retry_policy": retry_policy.to_record() if retry_policy else None,
        "concurrency": limit_records(concurrency),
        "priority": priority_record(priority),
    }
    return inst.schedule_activity(activity_type, args, options, result_fn=result_fn)


#: a local activity's defaults: each attempt's time, and its retries (all within the workflow task)
LOCAL_START_TO_CLOSE = timedelta(seconds=10)
LOCAL_RETRY_POLICY = RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=3)


@overload
def execute_local_activity(
    activity: Callable[..., Awaitable[_R]],
    *args: Any,
    start_to_close_timeout: timedelta | None = None,
    schedule_to_close_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    result_type: Any = None,
) -> asyncio.Future[_R]: ...
@overload
def execute_local_activity(
    activity: Callable[..., Any] | str,
    *args: Any,
    start_to_close_timeout: timedelta | None = None,
    schedule_to_close_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    result_type: Any = None,
) -> asyncio.Future[Any]: ...
def execute_local_activity(
    activity: Callable[..., Any] | str,
    *args: Any,
    start_to_close_timeout: timedelta | None = None,
    schedule_to_close_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    result_type: Any = None,
) -> asyncio.Future[Any]:
    """Run a short activity in the worker that runs this workflow task, and return an awaitable
    of its result (decision 0043).

    Its outcome is recorded with the workflow task's completion, as a marker in the history; a
    replay takes the recorded outcome and does not run it again. It takes no trip through the
    engine of its own: a workflow of three local activities completes in one workflow task. The
    activity must be registered on the worker (``activities=[...]``), like any other.

    For short side effects only: while it runs, the workflow task is open and the workflow takes
    no signal. Attempts are retried within the task by ``retry_policy`` (default: 3 attempts,
    100 ms apart doubling), each bounded by ``start_to_close_timeout`` (default 10 s), all by
    ``schedule_to_close_timeout`` (default none). If the worker stops before the task's completion
    is recorded, the task runs again elsewhere and so does the local activity: it runs at least
    once, as an activity does. A failure reaches the workflow as ``ActivityError``.
    """
    inst = _instance()
    activity_type, result_fn = _activity_type(activity, result_type)
    options = {
        "start_to_close_timeout_ms": to_ms(start_to_close_timeout or LOCAL_START_TO_CLOSE),
        "schedule_to_close_timeout_ms": to_ms(schedule_to_close_timeout),
        "retry_policy": retry_policy or LOCAL_RETRY_POLICY,
    }
    return inst.schedule_local_activity(activity_type, args, options, result_fn=result_fn)


#: Temporal's names for an activity given as a method (``MyActivities.charge``): here the same call
execute_activity_method = execute_activity
execute_local_activity_method = execute_local_activity


def _activity_type(activity: Callable[..., Any] | str, result_type: Any) -> tuple[str, Callable[..., Any] | None]:
    """(activity type name, the function whose return type types its result) of what a workflow
    passes to ``execute_activity`` / ``execute_local_activity``."""
    if isinstance(activity, str):
        activity_type, result_fn = activity, None
    else:
        defn_ = getattr(activity, "__kadence_activity__", None)
        if defn_ is None:
            raise KadenceError(f"{activity!r} is not an @activity.defn function or an activity type name")
        activity_type, result_fn = defn_.name, defn_.fn
    if result_type is not None:
        result_fn = _returning(result_type)
    return activity_type, result_fn


@functools.lru_cache(maxsize=256)
def _returning(result_type: Any) -> Callable[..., Any]:
    """A function whose return type is ``result_type``: what types a result (``kadence.topics.typed``)."""

    def typed() -> Any:  # pragma: no cover - never called, only its annotation is read
        raise NotImplementedError

    typed.__annotations__ = {"return": result_type}
    return typed


async def sleep(duration: timedelta | float) -> None:
    """Sleep durably: a timer recorded in history and fired by the engine, from milliseconds to
    years; it survives restarts of every component. ``asyncio.sleep`` in workflow code is the same."""
    seconds = duration.total_seconds() if isinstance(duration, timedelta) else float(duration)
    _instance()
    await asyncio.sleep(max(0.0, seconds))


async def sleep_until(when: datetime) -> None:
    """Sleep durably until the instant ``when`` (a timezone-aware ``datetime``): the engine fires
    the timer then, however long the workflow task that asked for it took to be recorded, where
    ``sleep(when - workflow.now())`` counts its duration from when the engine records it (later
    by the task's time in queues and in the worker). A time already past fires at once. The
    timer and its cancellation are those of ``sleep``."""
    inst = _instance()
    if not isinstance(when, datetime) or when.tzinfo is None:
        raise InvalidArgumentError("sleep_until takes a timezone-aware datetime", field="when")
    fire_at_ms = int(when.timestamp() * 1000)
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    handle = inst.start_timer(
        max(0, fire_at_ms - inst.now_ms) / 1000, _wake, (fut,), fire_at_ms=max(fire_at_ms, inst.now_ms)
    )
    try:
        await fut
    finally:
        handle.cancel()  # (nothing once it fired; a cancel of the sleep cancels the timer)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


async def wait_condition(fn: Callable[[], bool], *, timeout: timedelta | float | None = None) -> None:
    """Wait until ``fn()`` is true (checked after every event the workflow sees).

    With ``timeout``, raises ``asyncio.TimeoutError`` when it passes first (a durable timer)."""
    fut = _instance().wait_condition(fn)
    if timeout is None:
        await fut
        return
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    await asyncio.wait_for(fut, seconds)


def continue_as_new(*args: Any) -> None:
    """End this run and start a fresh run of the same workflow ID with ``args`` (and an empty
    history). Use it before a long-lived workflow's history grows past ~10,000 events."""
    _instance()
    raise ContinueAsNew(args)


def upsert_search_attributes(attributes: dict[str, SearchAttributeValue]) -> None:
    """Record search attributes for this run: each a str, a list of str, an int, a float, a bool
    or a timezone-aware datetime (``kadence.topics.search_attributes``); visibility follows the
    history. A value of another type is an ``InvalidIdentifierError`` naming the attribute."""
    checked = check_search_attributes(attributes)  # InvalidIdentifierError naming a bad one
    inst = _instance()
    inst.record("UpsertSearchAttributes", {"search_attributes": checked})
    inst.info = replace(inst.info, search_attributes={**inst.info.search_attributes, **from_wire(checked)})


def publish(stream: str, value: Any) -> None:
    """Publish ``value`` on this workflow's stream ``stream`` (``handle.stream(stream)`` reads
    it, as does ``GET /v1/workflows/{id}/streams/{stream}``): written with this workflow task's
    completion, in its transaction, and recorded in the history as a ``StreamRecordPublished``
    (the name only), so a replay of the code publishes nothing again. 256 KiB a value."""
    name = check_stream(stream)
    inst = _instance()
    check_streams_writable()
    inst.record("PublishToStream", {"stream": name, "value": check_value(name, inst.converter.to_bytes(value))})


def patched(patch_id: str) -> bool:
    """Change workflow code safely: ``if workflow.patched("fee-v2"): new path else: old path``.

    Runs started before the change replay the old path (their history has no marker); new runs,
    and open runs from their next workflow task on, take the new path and record a marker.
    Once no run on the old path remains, replace the call by ``deprecate_patch`` and drop the
    old branch; later still, remove the call."""
    return _instance().patched(patch_id)


def deprecate_patch(patch_id: str) -> None:
    """The old path of ``patched(patch_id)`` is gone: histories with or without its marker replay."""
    _instance().patched(patch_id, deprecated=True)


class ChildWorkflowHandle:
    """A started child workflow: ``await handle.result()`` (or ``await handle``)."""

    def __init__(self, workflow_id: str, run_id: str, result: asyncio.Future[Any]) -> None:
        self.id, self.run_id, self._result = workflow_id, run_id, result

    async def result(self) -> Any:
        return await self._result

    def __await__(self) -> Generator[Any, None, Any]:
        return self._result.__await__()


_POLICIES = ("terminate", "request_cancel", "abandon")


async def start_child_workflow(
    workflow: Any,
    *args: Any,
    id: str | None = None,
    task_queue: str | None = None,
    parent_close_policy: str = "terminate",
    run_timeout: timedelta | None = None,
    concurrency: Iterable[Limit] | None = None,
    priority: Priority | int | None = None,
) -> ChildWorkflowHandle:
    """Start a child workflow (on its own shard) and wait until it has started; ``concurrency``
    and ``priority``: its limits and priority, as a start's (``Client.start_workflow``; the
    priority's unset fields are this run's).

    ``id`` defaults to ``{parent_id}/child-{n}``, stable across replays, so a retried parent task
    starts each child once. ``parent_close_policy``: what happens to the child when this run
    closes first: ``terminate`` (default), ``request_cancel`` or ``abandon``. A child that cannot
    start (its ID is running) raises ``ChildWorkflowError``."""
    from ._definitions import run_function, workflow_type_name

    if parent_close_policy not in _POLICIES:
        raise KadenceError(f"parent_close_policy must be one of {', '.join(_POLICIES)}")
    inst = _instance()
    child_id, started, result = inst.start_child(
        workflow_type_name(workflow),
        args,
        id,
        task_queue,
        parent_close_policy,
        to_ms(run_timeout),
        result_fn=run_function(workflow),
        limits={"concurrency": limit_records(concurrency), "priority": priority_record(priority)},
    )
    run_id = await started
    return ChildWorkflowHandle(child_id, run_id, result)


async def execute_child_workflow(workflow: Any, *args: Any, **kwargs: Any) -> Any:
    """Start a child workflow and wait for its result (``ChildWorkflowError`` if it did not complete)."""
    handle = await start_child_workflow(workflow, *args, **kwargs)
    return await handle.result()


def now() -> datetime:
    """The workflow's current time: the time its current workflow task was scheduled (UTC)."""
    return _instance().now()


def random() -> _random.Random:
    """A random generator seeded by the run, identical on every replay."""
    return _instance().random()


def uuid4() -> _uuid.UUID:
    """A UUID that is the same on every replay of this run."""
    return _instance().uuid4()


def info() -> WorkflowInfo:
    return _instance().info


def all_handlers_finished() -> bool:
    """Whether every async signal and update handler of this run has finished: wait for it
    before the run returns, so that no handler's work is cut off by the run's end::

        await workflow.wait_condition(workflow.all_handlers_finished)"""
    return _instance().all_handlers_finished()


def is_replaying() -> bool:
    return _instance().replaying


class _WorkflowLogger(logging.LoggerAdapter[logging.Logger]):
    """Adds workflow_id/run_id to records; silent while the workflow replays its history."""

    def isEnabledFor(self, level: int) -> bool:  # noqa: N802 - logging's name
        try:
            if _instance().silent:
                return False
        except KadenceError:
            pass
        enabled: bool = self.logger.isEnabledFor(level)
        return enabled

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        try:
            i = _instance().info
            extra = {"workflow_id": i.workflow_id, "run_id": i.run_id}
            msg = f"[{i.workflow_type} {i.workflow_id} {i.run_id}] {msg}"
        except KadenceError:
            extra = {}
        kwargs["extra"] = {**extra, **kwargs.get("extra", {})}
        return msg, kwargs


logger = _WorkflowLogger(logging.getLogger("kadence.workflow"), {})
