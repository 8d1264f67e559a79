"""The SDK client: start workflows, wait for their results, read their history."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable
from datetime import timedelta
from typing import Any, TypeVar

from opentelemetry.trace import TracerProvider

from kadence.schemas.records import StartWorkflow
from kadence.storage import open_large_payloads
from kadence.topics.async_completion import AsyncActivityHandle
from kadence.topics.concurrency import set_max_body
from kadence.topics.config import KafkaConfig
from kadence.topics.debounce import with_debounce
from kadence.topics.eager_start import EagerStarter, eager_body, settle
from kadence.topics.engine_client import EngineClient
from kadence.topics.errors import BrokerUnavailableError, InvalidArgumentError
from kadence.topics.identifiers import check_task_queue, check_workflow_id
from kadence.topics.large_payloads import LargePayloadConfig, LargePayloads
from kadence.topics.payload import JsonConverter, PayloadCodec, PayloadConverter
from kadence.topics.protocol import (
    expect_ok,
    result_body,
    signal_body,
    start_body,
    update_body,
)
from kadence.topics.queue_limits import QueueLimit, read_queue_limits, set_queue_limit
from kadence.topics.records import new_id
from kadence.topics.schedules import ScheduleAction, SchedulePolicy, ScheduleSpec
from kadence.topics.typed import signature

from ._definitions import (
    Limit,
    Priority,
    RetryPolicy,
    limit_records,
    priority_record,
    run_function,
    to_ms,
    workflow_type_name,
)
from ._handle import ResetPlan, WorkflowHandle, signal_name
from ._schedules import ScheduleHandle, create_schedule
from ._standalone import ActivityHandle, ActivityStart, start_activity
from ._updates import update_outcome, update_target
from .interceptors import ClientCall, Interceptor, chain

_R = TypeVar("_R")

log = logging.getLogger(__name__)

__all__ = ["Client", "ResetPlan", "WorkflowHandle"]


def _debounce_ms(value: timedelta | None, what: str) -> int:
    """A ``debounce``/``debounce_max`` argument in ms (0: none); ``InvalidArgumentError`` unless a
    positive ``timedelta``."""
    if value is None:
        return 0
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise InvalidArgumentError(f"{what} must be a positive timedelta, not {value!r}")
    return max(1, round(value.total_seconds() * 1000))


class Client:
    """Connects to a namespace. ``await Client.connect(...)``, then ``start_workflow(...)``."""

    interceptors: tuple[Any, ...] = ()

    def __init__(
        self, engine: EngineClient, converter: PayloadConverter, interceptors: Iterable[Interceptor] = ()
    ) -> None:
        self._engine = engine
        self.converter = converter
        #: around every operation of this client and its handles, and the activities and
        #: workflows of its Workers (``kadence.interceptors``)
        self.interceptors: tuple[Interceptor, ...] = tuple(interceptors)
        self.config = engine.config
        self.identity = engine.config.client_id
        #: the Workers serving with this client (they register themselves): an eager start's
        #: first task runs on one of them
        self._workers: set[EagerStarter] = set()

    @classmethod
    async def connect(
        cls,
        bootstrap: str | None = None,
        *,
        namespace: str | None = None,
        config: KafkaConfig | None = None,
        codec: PayloadCodec | None = None,
        wait_for_broker: float = 0.0,
        tracer_provider: TracerProvider | None = None,
        converter: PayloadConverter | None = None,
        exceptions: Iterable[type[BaseException]] = (),
        large_payloads: LargePayloads | None = None,
        interceptors: Iterable[Interceptor] = (),
    ) -> Client:
        """Connect to a namespace; ``BrokerUnavailableError`` if Kafka does not answer.

        ``converter``: how payloads become bytes and back (default: ``JsonConverter(codec)``,
        JSON typed by the receivers' hints; ``docs/guide.md``, "Typed payloads").

        ``exceptions``: exception classes that a failure of the same type name is raised as, as
        ``cls(message, *details)``, in this client's results and, through a ``Worker`` of this
        client, in its workflows (an activity's or child's error); others arrive as
        ``ApplicationError`` with ``.type`` and ``.details``.

        ``large_payloads``: where payloads over the size threshold are stored, referenced from the
        history (default: as ``KADENCE_PAYLOAD_*`` say, ``LargePayloadConfig.from_env()``; with no
        store configured they stay inline; ``docs/guide.md``, "Large payloads").

        ``interceptors``: code around every call of this client, and of the activities and
        workflows of Workers built on it (``kadence.interceptors``; the first is the outermost).

        ``tracer_provider``: the OpenTelemetry provider for its spans (default: the global one;
        ``docs/tracing.md``).

        ``wait_for_broker``: for how many seconds to keep trying (with backoff, a warning per
        try) while Kafka does not answer, instead of failing at once; ``math.inf``: until it
        does (what a worker process wants when it may start before the broker)."""
        if config is None:
            overrides = {}
            if bootstrap:
                overrides["bootstrap"] = bootstrap
            if namespace:
                overrides["namespace"] = namespace
            config = KafkaConfig.from_env(None, **overrides)
        if converter is None:
            large = large_payloads if large_payloads is not None else open_large_payloads(LargePayloadConfig.from_env())
            converter = JsonConverter(codec, exceptions=exceptions, large=large)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_for_broker
        delay = 0.5
        while True:
            try:
                engine = await loop.run_in_executor(
                    None, functools.partial(EngineClient, config, tracer_provider=tracer_provider)
                )
                return cls(engine, converter, interceptors)
            except BrokerUnavailableError as exc:
                if loop.time() + delay > deadline:
                    raise
                log.warning("waiting for the broker: %s; trying again in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(5.0, delay * 2)

    async def _intercepted(
        self,
        operation: str,
        workflow_id: str,
        name: str | None,
        args: tuple[Any, ...],
        impl: Callable[[ClientCall], Awaitable[_R]],
        headers: dict[str, Any] | None = None,
    ) -> _R:
        """``impl(call)`` through this client's interceptors."""
        call = ClientCall(operation, workflow_id, name, tuple(args), dict(headers or {}))
        result: _R = await chain(self.interceptors, "intercept_client", impl)(call)
        return result

    def _checked_start(
        self,
        workflow: Any,
        args: tuple[Any, ...],
        id: str,
        task_queue: str,
        id_reuse_policy: str,
        run_timeout: timedelta | None,
        search_attributes: dict[str, Any] | None,
        execution_timeout: timedelta | None,
        memo: dict[str, Any] | None = None,
        headers: dict[str, Any] | None = None,
        cron_schedule: str | None = None,
        concurrency: Iterable[Limit] | None = None,
        debounce: tuple[timedelta | None, timedelta | None] = (None, None),
        priority: Priority | int | None = None,
    ) -> StartWorkflow:
        """The ``StartWorkflow`` body of ``start_workflow`` and ``execute_workflow``, arguments
        checked; ``debounce``: the debounce and its cap."""
        check_workflow_id(id, field="id")
        body = self._start_body(
            workflow,
            args,
            task_queue,
            id_reuse_policy,
            run_timeout,
            search_attributes,
            execution_timeout,
            memo,
            headers,
            cron_schedule,
            concurrency,
        )
        wait, cap = (_debounce_ms(d, what) for d, what in zip(debounce, ("debounce", "debounce_max"), strict=True))
        if wait or cap:
            body = with_debounce(body, wait, cap)
        return {**body, "priority": priority_record(priority)}

    def _start_body(
        self,
        workflow: Any,
        args: tuple[Any, ...],
        task_queue: str,
        id_reuse_policy: str,
        run_timeout: timedelta | None,
        search_attributes: dict[str, Any] | None,
        execution_timeout: timedelta | None = None,
        memo: dict[str, Any] | None = None,
        headers: dict[str, Any] | None = None,
        cron_schedule: str | None = None,
        concurrency: Iterable[Limit] | None = None,
    ) -> StartWorkflow:
        run_fn = run_function(workflow)
        if run_fn is not None:  # arguments that cannot become the run's types fail here, before anything is sent
            signature(run_fn, method=True).args(list(args), f"workflow {workflow_type_name(workflow)}")
        return start_body(
            workflow_type_name(workflow),
            task_queue,
            self.converter.to_bytes(list(args)),
            id_reuse_policy=id_reuse_policy,
            run_timeout_ms=to_ms(run_timeout),
            search_attributes=search_attributes,
            execution_timeout_ms=to_ms(execution_timeout),
            memo={str(k): self.converter.to_bytes(v) for k, v in (memo or {}).items()},
            headers={str(k): str(v) for k, v in (headers or {}).items()},
            cron_schedule=cron_schedule,
            concurrency=limit_records(concurrency),
        )

    async def signal_with_start(
        self,
        workflow: Any,
        *args: Any,
        id: str,
        task_queue: str,
        signal: Any,
        signal_args: tuple[Any, ...] = (),
        request_id: str | None = None,
        run_timeout: timedelta | None = None,
        memo: dict[str, Any] | None = None,
        concurrency: Iterable[Limit] | None = None,
        priority: Priority | int | None = None,
    ) -> WorkflowHandle:
        """Signal the workflow, starting it first if no run is open (one atomic command).
        ``signal``: its name, or the handler method itself; ``concurrency`` and ``priority``: a
        start's (``start_workflow``)."""
        start_priority = priority_record(priority)
        check_workflow_id(id, field="id")
        signal = signal_name(signal)

        async def impl(call: ClientCall) -> WorkflowHandle:
            start = self._start_body(
                workflow,
                args,
                task_queue,
                "allow_duplicate",
                run_timeout,
                None,
                memo=memo,
                headers=call.headers,
                concurrency=concurrency,
            )
            start = {**start, "priority": start_priority}
            reply = await self._engine.request(
                id,
                "SignalWorkflow",
                signal_body(signal, self.converter.to_bytes(list(call.args)), identity=self.identity, start=start),
                request_id=request_id or new_id(),
            )
            expect_ok(reply, id, what=f"signal-with-start of {id!r} rejected")
            return WorkflowHandle(self, id, reply["run_id"], run_fn=run_function(workflow))

        return await self._intercepted("signal_with_start", id, signal, signal_args, impl)

    async def execute_update_with_start(
        self,
        workflow: Any,
        *args: Any,
        id: str,
        task_queue: str,
        update: Any,
        update_args: tuple[Any, ...] = (),
        request_id: str | None = None,
        run_timeout: timedelta | None = None,
        timeout: float | None = None,
        result_type: Any = None,
        memo: dict[str, Any] | None = None,
    ) -> Any:
        """Run an update, starting the workflow first if no run is open (one atomic command);
        the update's result, as ``WorkflowHandle.execute_update``."""
        check_workflow_id(id, field="id")
        name, handler = update_target(update)
        if handler is not None:
            signature(handler, method=True).args(list(update_args), f"update {name!r}")

        async def impl(call: ClientCall) -> Any:
            start = self._start_body(
                workflow, args, task_queue, "allow_duplicate", run_timeout, None, memo=memo, headers=call.headers
            )
            reply = await self._engine.request(
                id,
                "UpdateWorkflow",
                update_body(name, self.converter.to_bytes(list(call.args)), identity=self.identity, start=start),
                request_id=request_id or new_id(),
                timeout=timeout,
            )
            return update_outcome(self, id, name, handler, result_type, reply)

        return await self._intercepted("update_with_start", id, name, update_args, impl)

    async def start_workflow(
        self,
        workflow: Any,
        *args: Any,
        id: str,
        task_queue: str,
        request_id: str | None = None,
        id_reuse_policy: str = "allow_duplicate",
        run_timeout: timedelta | None = None,
        execution_timeout: timedelta | None = None,
        search_attributes: dict[str, Any] | None = None,
        timeout: float = 30.0,
        memo: dict[str, Any] | None = None,
        cron_schedule: str | None = None,
        request_eager_start: bool = False,
        concurrency: Iterable[Limit] | None = None,
        debounce: timedelta | None = None,
        debounce_max: timedelta | None = None,
        priority: Priority | int | None = None,
    ) -> WorkflowHandle:
        """Start a run. A retry with the same ``request_id`` gets the first answer (same run ID).

        ``memo``: non-indexed metadata (name -> any value a payload can hold), shown by
        ``describe()`` and ``workflow.info().memo``; kept through continue-as-new.

        ``search_attributes``: name -> a str, a list of str, an int, a float, a bool or a
        timezone-aware datetime; the runs are listed and counted by them.

        ``cron_schedule`` (``"*/5 * * * *"``, ``"@hourly"``, ``"@every 30s"``, with an optional
        ``CRON_TZ=<zone>`` prefix; ``kadence.topics.cron``): a cron workflow. Its first run's code
        runs at the schedule's next time; each run that completes, fails or times out is followed
        by a new run with the same arguments at the time after; a cancel or a terminate ends the
        chain, whose result ``result()`` then waits for. ``InvalidArgumentError`` if it does not parse.

        ``request_eager_start``: when a ``Worker`` of this client serves ``task_queue`` and has the
        workflow, it runs the run's first workflow task (its local activities included) before
        the start is sent, and the engine records the start and that task in one transaction
        (one Kafka transaction for a workflow of local activities). Otherwise, or when the engine
        does not take the task (the ID in use, a duplicate start), the start is an ordinary one.

        ``concurrency`` (``[Limit("tenant", "acme", max=20), ...]``): the run holds a slot of
        each limit from its start to the close of its chain; its first workflow task waits until
        it holds them all (first come, first served; docs/guide.md, "Concurrency limits"). Such a
        start is never eager.

        ``debounce`` (a ``timedelta``): the run's code waits this long; another debounced start
        of the same ``id`` meanwhile joins the run (the same run ID, no
        ``WorkflowAlreadyStartedError``), gives it its input and makes it wait ``debounce`` again
        from then, so a burst of starts gives one run after the last of them, with the last
        input. ``debounce_max`` caps the wait from the first start of the burst
        (docs/guide.md, "Debounced starts"). Such a start is never eager.

        ``priority`` (a ``Priority``, or a level 1-5): how the run's activities and children are
        ordered when their task queue has a backlog (level 1 first; a fairness key shares a
        level among tenants); they inherit what they do not set (docs/guide.md, "Priority and
        fairness").

        Raises ``WorkflowAlreadyStartedError`` (with ``run_id``) when a run is already open (and
        not a debounced one waiting, for a debounced start).
        """

        async def impl(call: ClientCall) -> WorkflowHandle:
            body = self._checked_start(
                workflow,
                call.args,
                id,
                task_queue,
                id_reuse_policy,
                run_timeout,
                search_attributes,
                execution_timeout,
                memo,
                call.headers,
                cron_schedule,
                concurrency,
                (debounce, debounce_max),
                priority,
            )
            rid, event_id = request_id or new_id(), new_id()
            body, starter = await self._eager(id, body, rid, event_id, request_eager_start)
            fut = self._engine.send(id, "StartWorkflow", body, request_id=rid, event_id=event_id)
            reply = await self._engine.wait(id, "StartWorkflow", rid, fut, timeout)
            settle(starter, id, event_id, reply)
            return self._started(id, reply, workflow)

        check_workflow_id(id, field="id")  # bad input fails before any interceptor sees it
        check_task_queue(task_queue)
        return await self._intercepted("start_workflow", id, workflow_type_name(workflow), args, impl)

    async def _eager(
        self, workflow_id: str, body: StartWorkflow, request_id: str, event_id: str, requested: bool
    ) -> tuple[StartWorkflow, EagerStarter | None]:
        """An eager start's body (with the first task, when a worker of this client could run
        it) and that worker, or the body unchanged and None."""
        if not requested:
            return body, None
        return await eager_body(self._workers, self.config.namespace, workflow_id, body, request_id, event_id)

    def _started(self, id: str, reply: dict[str, Any], workflow: Any) -> WorkflowHandle:
        """The handle a ``StartWorkflow`` reply gives, or the error it stands for."""
        expect_ok(reply, id, what=f"start of {id!r} rejected")
        return WorkflowHandle(self, id, reply["run_id"], run_fn=run_function(workflow))

    async def execute_workflow(
        self,
        workflow: Any,
        *args: Any,
        id: str,
        task_queue: str,
        request_id: str | None = None,
        id_reuse_policy: str = "allow_duplicate",
        run_timeout: timedelta | None = None,
        execution_timeout: timedelta | None = None,
        search_attributes: dict[str, Any] | None = None,
        timeout: float = 30.0,
        result_timeout: float | None = None,
        memo: dict[str, Any] | None = None,
        cron_schedule: str | None = None,
        request_eager_start: bool = False,
        concurrency: Iterable[Limit] | None = None,
        debounce: timedelta | None = None,
        debounce_max: timedelta | None = None,
        priority: Priority | int | None = None,
    ) -> Any:
        """Start a run and wait for its result: what ``start_workflow`` and then ``result()`` do,
        with the same errors, in one round trip fewer.

        The request for the result rides on the start (``StartWorkflow.result_request_id``):
        one command, applied in the start's transaction, so the result awaited is the new run's
        (through continue-as-new), answered when it closes.
        ``timeout`` bounds the wait for the start's answer, ``result_timeout`` (default: none)
        the wait for the result. With ``debounce``, the result is the run the start joined."""

        async def impl(call: ClientCall) -> Any:
            body = self._checked_start(
                workflow,
                call.args,
                id,
                task_queue,
                id_reuse_policy,
                run_timeout,
                search_attributes,
                execution_timeout,
                memo,
                call.headers,
                cron_schedule,
                concurrency,
                (debounce, debounce_max),
                priority,
            )
            engine, start_request, result_request, event_id = self._engine, request_id or new_id(), new_id(), new_id()
            body, starter = await self._eager(id, body, start_request, event_id, request_eager_start)
            # the start carries the result request: one command (decision 0052)
            body = {**body, "result_request_id": result_request}
            # awaited before the start goes out, so that no answer can come before it is awaited
            result = engine.send(
                id, "AwaitWorkflowResult", result_body(wait=True), request_id=result_request, deferred=True
            )
            try:
                started = engine.send(id, "StartWorkflow", body, request_id=start_request, event_id=event_id)
            except BaseException:
                engine.abandon(id, result_request)
                raise
            try:
                start_reply = await engine.wait(id, "StartWorkflow", start_request, started, timeout)
                settle(starter, id, event_id, start_reply)
                handle = self._started(id, start_reply, workflow)
            except BaseException:
                engine.abandon(id, result_request)  # its reply, if one comes, is not waited for
                raise
            try:
                reply = await engine.wait(id, "AwaitWorkflowResult", result_request, result, result_timeout)
            except BrokerUnavailableError as exc:
                await handle._raise_if_stuck(exc)
                raise
            return handle._outcome(reply)

        check_workflow_id(id, field="id")
        check_task_queue(task_queue)
        return await self._intercepted("execute_workflow", id, workflow_type_name(workflow), args, impl)

    @property
    def engine(self) -> EngineClient:
        """The engine client under this client (the Kafka producer and the reply consumer): what
        the worker, the handles and the test kit send commands and read histories through."""
        return self._engine

    def get_async_activity_handle(
        self,
        task_token: bytes | str | None = None,
        *,
        workflow_id: str | None = None,
        run_id: str | None = None,
        activity_id: str | None = None,
    ) -> AsyncActivityHandle:
        """A handle to complete, fail or heartbeat an activity whose function called
        ``activity.raise_complete_async()``: by its ``task_token`` (``activity.info().task_token``),
        or by ``workflow_id`` and ``activity_id`` (its current attempt)."""
        return AsyncActivityHandle(
            self._engine,
            self.converter,
            self.identity,
            task_token=task_token,
            workflow_id=workflow_id,
            run_id=run_id,
            activity_id=activity_id,
        )

    async def set_queue_limit(
        self,
        task_queue: str,
        activities_per_second: float | None = None,
        activity_types: dict[str, float] | None = None,
        *,
        reason: str = "",
        activity_concurrency: dict[str, int] | None = None,
    ) -> QueueLimit:
        """Limit how many activities a second ``task_queue``'s workers start, all together: the
        whole queue and/or single activity types (nothing given: lift the limits). Replaces the
        queue's previous limits; running workers apply the change within about a second, and
        tasks beyond it wait in the queue's backlog. ``activity_concurrency`` (activity type, or
        ``"*"`` for all, -> a count): at most that many of the queue's activities execute at once,
        a concurrency limit the processors add to each activity they schedule from then on
        (docs/guide.md, "Concurrency limits"). ``InvalidArgumentError`` for a bad limit (nothing
        written)."""
        return await asyncio.get_running_loop().run_in_executor(
            None,
            functools.partial(
                set_queue_limit,
                self.config,
                task_queue,
                activities_per_second,
                activity_types,
                identity=self.identity,
                reason=reason,
                activity_concurrency=activity_concurrency,
            ),
        )

    async def set_limit_max(
        self,
        name: str,
        value: str,
        max: int,
        *,
        per: timedelta | None = None,
        reason: str = "",
        identity: str | None = None,
        timeout: float = 30.0,
    ) -> str:
        """An operator's max for the limit key ``name=value`` (its rate limit's with ``per``, the
        window): it applies instead of the max the starts and activities name, at once (a higher
        max admits waiters), until lifted with ``max=0``. Answered by the shard that owns the key
        once applied; the key's record keeps who, when and why, and the processor logs it as an
        audit line (``identity``: who, by default this client's). ``InvalidArgumentError`` for a
        bad key, max or window (nothing sent)."""
        per_ms = None if per is None else round(per.total_seconds() * 1000)
        who = self.identity if identity is None else identity
        key, body = set_max_body(name, value, max, per_ms=per_ms, identity=who, reason=reason)
        reply = await self._engine.request(key, "ConcurrencySlot", body, request_id=new_id(), timeout=timeout)
        return str(expect_ok(reply, key, what=f"the max of {key} not set")["message"])

    async def queue_limits(self) -> dict[str, QueueLimit]:
        """Task queue -> its rate limits (queues never limited are absent)."""
        return await asyncio.get_running_loop().run_in_executor(None, read_queue_limits, self.config)

    async def start_activity(
        self,
        activity: Callable[..., Any] | str,
        *args: Any,
        id: str,
        task_queue: str,
        start_to_close_timeout: timedelta | None = None,
        schedule_to_close_timeout: timedelta | None = None,
        schedule_to_start_timeout: timedelta | None = None,
        heartbeat_timeout: timedelta | None = None,
        retry_policy: RetryPolicy | None = None,
        id_reuse_policy: str = "allow_duplicate",
        id_conflict_policy: str = "fail",
        search_attributes: dict[str, Any] | None = None,
        concurrency: Iterable[Limit] | None = None,
        priority: Priority | int | None = None,
        result_type: Any = None,
        request_id: str | None = None,
        timeout: float = 30.0,
    ) -> ActivityHandle:
        """Start a standalone activity: an activity with no workflow around it, run by any worker
        of ``task_queue`` that has it, with the retries, timeouts, heartbeats and async completion
        of a workflow's activity, and one stable result per ``id`` (docs/guide.md, "Standalone
        activities"). Activity IDs are apart from workflow IDs.

        At least one of ``start_to_close_timeout`` and ``schedule_to_close_timeout`` is needed.
        ``id_conflict_policy`` when a run with ``id`` is open: ``fail`` (``ActivityAlreadyStartedError``),
        ``use_existing`` (its handle), ``terminate_existing``; ``id_reuse_policy`` when the last is
        closed: ``allow_duplicate``, ``allow_duplicate_failed_only``, ``reject_duplicate``. A retry
        with the same ``request_id`` gets the first answer."""
        ask = ActivityStart(
            activity, args, id, task_queue, start_to_close_timeout, schedule_to_close_timeout,
            schedule_to_start_timeout, heartbeat_timeout, retry_policy, id_reuse_policy, id_conflict_policy,
            search_attributes, concurrency, priority, result_type,
        )  # fmt: skip
        return await start_activity(self, ask, request_id=request_id, timeout=timeout)

    async def execute_activity(
        self, activity: Callable[..., Any] | str, *args: Any, result_timeout: float | None = None, **options: Any
    ) -> Any:
        """``start_activity`` (same arguments) and then its ``result()``."""
        handle = await self.start_activity(activity, *args, **options)
        return await handle.result(timeout=result_timeout)

    def get_activity_handle(
        self, activity_id: str, *, run_id: str | None = None, result_type: Any = None
    ) -> ActivityHandle:
        """A handle to the standalone activity ``activity_id`` (its latest run, or ``run_id``)."""
        return ActivityHandle(self, activity_id, run_id, result_type=result_type)

    def get_workflow_handle(
        self, workflow_id: str, *, run_id: str | None = None, result_type: Any = None
    ) -> WorkflowHandle:
        """A handle to an existing workflow; ``result_type`` types its result (default: as decoded)."""
        check_workflow_id(workflow_id)
        return WorkflowHandle(self, workflow_id, run_id, result_type=result_type)

    async def create_schedule(
        self,
        id: str,
        *,
        spec: ScheduleSpec,
        action: ScheduleAction,
        policy: SchedulePolicy | None = None,
        paused: bool = False,
        note: str = "",
        request_id: str | None = None,
        remaining_actions: int | None = None,
    ) -> ScheduleHandle:
        """Create the schedule ``id``: at each time of ``spec``, start ``action``
        (``kadence.schedule_action(MyWorkflow, arg, task_queue=...)``), by ``policy`` (overlap,
        catch-up window, pause on failure), at most ``remaining_actions`` runs in all (None: no
        limit). A ``kadence schedules worker`` runs schedules. ``ScheduleAlreadyRunningError`` if
        it exists; ``InvalidArgumentError`` for a bad spec, action or policy (nothing sent). See
        docs/guide.md, "Schedules"."""
        return await create_schedule(
            self, id, spec=spec, action=action, policy=policy, paused=paused, note=note, request_id=request_id,
            remaining_actions=remaining_actions,
        )  # fmt: skip

    def get_schedule_handle(self, id: str) -> ScheduleHandle:
        """A handle to the schedule ``id``: describe, pause, unpause, trigger, backfill, update, delete."""
        return ScheduleHandle(self, id)

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._engine.close)

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
