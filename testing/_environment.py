"""``WorkflowEnvironment``: run workflows and activities in a test, without Kafka.

The engine is ``InMemoryEngine`` (the real state machine); the worker's part is here: it runs
workflow tasks on the real ``WorkflowInstance`` (the same replay loop and determinism checks as a
``Worker``), answers queries, and runs activities (the registered functions, or mocks registered
under the same name) with the real ``activity.info()`` and ``activity.heartbeat()``. The client is
the real ``kadence.Client`` over that engine.

Time skipping: while some caller waits for a workflow's result and nothing else can move (no
command queued, no task waiting, no activity running), the clock jumps to the next timer or
activity deadline. A 30-day ``workflow.sleep`` then takes milliseconds. ``sleep(seconds)`` moves
the clock on explicitly, firing what falls due on the way.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import logging
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, cast

from kadence import activity as _activity
from kadence._client import Client
from kadence._definitions import failure_types, registrations
from kadence._instance import HistoryGapError, WorkflowInfo, WorkflowInstance, task_failure_cause
from kadence._local_activities import run_local_activities, run_local_activity
from kadence._loop import install_guard
from kadence._queries import answer
from kadence._worker_metrics import NO_METRICS
from kadence.interceptors import Interceptor, invoke_activity
from kadence.schemas.records import ActivityTask, WorkflowTask
from kadence.topics.errors import ActivityAttemptLimitError, ConfigError, KadenceError, WorkflowTaskFailedError
from kadence.topics.large_payloads import LargePayloads
from kadence.topics.payload import JsonConverter, PayloadCodec
from kadence.topics.records import new_id
from kadence.topics.streams import PublishBuffer

from ._engine import InMemoryEngine

__all__ = ["WorkflowEnvironment"]

log = logging.getLogger(__name__)

IDENTITY = "kadence-testing"


class WorkflowEnvironment:
    """An engine and a worker in this process, for tests::

        async with WorkflowEnvironment(workflows=[OrderSaga], activities=[charge, refund]) as env:
            result = await env.client.execute_workflow(OrderSaga, order, id="o-1", task_queue="orders")

    Every task queue is served by the workflows and activities given. ``client`` is a real
    ``kadence.Client``; ``sleep(seconds)`` moves the virtual clock; ``now()`` reads it.
    ``exceptions``: classes failures are raised as (``Client.connect(exceptions=)``);
    ``large_payloads``: a store for payloads over its threshold (``Client.connect(large_payloads=)``;
    by default they stay inline); ``interceptors``: around the client's calls, the activities and
    the workflows (``kadence.interceptors``); ``workflow_failure_exception_types``: as a
    ``Worker``'s (what fails a run rather than its workflow task); ``max_activity_attempts``
    (default 100): an activity that reaches this attempt is not run, and the calls that wait on
    its workflow raise ``ActivityAttemptLimitError`` naming it (under the virtual clock, an
    activity that always fails would otherwise retry for ever at full speed)."""

    def __init__(
        self,
        *,
        workflows: Iterable[type] = (),
        activities: Iterable[Any] = (),
        namespace: str = "test",
        codec: PayloadCodec | None = None,
        exceptions: Iterable[type[BaseException]] = (),
        large_payloads: LargePayloads | None = None,
        interceptors: Iterable[Interceptor] = (),
        workflow_failure_exception_types: Iterable[type[BaseException]] = (),
        max_activity_attempts: int = 100,
    ) -> None:
        if max_activity_attempts < 1:
            raise ConfigError("max_activity_attempts must be >= 1")
        #: an activity's attempt past this stops its workflow (``ActivityAttemptLimitError``)
        self.max_activity_attempts = max_activity_attempts
        self._workflows, self._activities = registrations(workflows, activities)
        self._failure_types = failure_types(workflow_failure_exception_types, "WorkflowEnvironment")
        if self._workflows:
            install_guard()  # as a Worker: blocking sleeps, sockets, subprocesses fail workflow code
        self.engine = InMemoryEngine(namespace)
        self.converter = JsonConverter(codec, exceptions=exceptions, large=large_payloads)
        self.interceptors = tuple(interceptors)
        self.client = Client(self.engine, self.converter, self.interceptors)  # type: ignore[arg-type]
        self._instances: dict[str, WorkflowInstance] = {}
        self._running: set[asyncio.Task[Any]] = set()
        #: counts of what ran, as a Worker's ``stats`` (local activities)
        self.stats: collections.Counter[str] = collections.Counter()
        self._pump: asyncio.Task[Any] | None = None
        #: how far ``sleep`` allows the clock to be skipped (ms since the epoch)
        self._skip_until = 0
        self._crash: BaseException | None = None
        #: set by ``__aexit__``: the pump stops
        self._closing = False

    async def __aenter__(self) -> WorkflowEnvironment:
        self._pump = asyncio.get_running_loop().create_task(self._run(), name="kadence-testing-engine")
        return self

    async def __aexit__(self, *exc: object) -> None:
        for t in list(self._running):
            t.cancel()
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
        if self._pump is not None:
            # the flag too: Python 3.11's wait_for can swallow a cancellation that meets the
            # event it waits for (seen when a workflow is given up on mid-retry)
            self._closing = True
            self.engine.wake.set()
            self._pump.cancel()
            await asyncio.gather(self._pump, return_exceptions=True)
        for inst in self._instances.values():
            inst.discard()
        self._instances.clear()
        self.engine.close()
        if self._crash is not None and exc[0] is None:
            raise KadenceError(f"the test engine stopped: {self._crash!r}") from self._crash

    def now(self) -> datetime:
        """The virtual clock (what ``workflow.now()`` reads in new events)."""
        return datetime.fromtimestamp(self.engine.clock.now_ms() / 1000, tz=UTC)

    async def sleep(self, seconds: float) -> None:
        """Move the clock ``seconds`` ahead, firing every timer and deadline that falls due on the
        way, in order, and letting the workflows react to each before the next."""
        target = self.engine.clock.now_ms() + int(seconds * 1000)
        self._skip_until = max(self._skip_until, target)
        self.engine.wake.set()
        while self.engine.clock.now_ms() < target:
            self._raise_if_crashed()
            await asyncio.sleep(0.001)
        await self._settled()

    async def _settled(self) -> None:
        """Until nothing is queued and no activity runs."""
        while self.engine.pending_commands() or self.engine.tasks or self._running:
            self._raise_if_crashed()
            await asyncio.sleep(0.001)

    def _raise_if_crashed(self) -> None:
        if self._crash is not None:
            raise KadenceError(f"the test engine stopped: {self._crash!r}") from self._crash

    # -- the loop --------------------------------------------------------------------------------

    async def _run(self) -> None:
        engine = self.engine
        try:
            while not self._closing:
                if engine.step() or self._take_task():
                    await asyncio.sleep(0)  # let requesters and activities run between steps
                    continue
                if engine.fire_due():
                    continue
                due = engine.next_due_ms()
                if due is not None and not self._running and (engine.result_waiters or due <= self._skip_until):
                    engine.clock.skip_to(due)  # everything waits on the clock: skip ahead
                    continue
                if self._skip_until > engine.clock.now_ms() and not self._running:
                    engine.clock.skip_to(self._skip_until)
                    continue
                engine.wake.clear()
                wait = None if due is None else max(0.0, (due - engine.clock.now_ms()) / 1000)
                try:
                    await asyncio.wait_for(engine.wake.wait(), wait)
                except TimeoutError:
                    pass
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.exception("the test engine stopped")
            self._crash = exc
            self.engine.close()

    def _take_task(self) -> bool:
        if not self.engine.tasks:
            return False
        kind, _queue, task = self.engine.tasks.popleft()
        if kind == "activity":
            t = asyncio.get_running_loop().create_task(self._run_activity(task))
            self._running.add(t)
            t.add_done_callback(self._activity_done)
        elif task["query"] is not None:
            if not task["events"]:  # a closed run: the engine keeps no history for it
                _run, events = self.engine.history_of(task["workflow_id"], task["run_id"])
                task = {**task, "events": events}
            self._answer_query(task)
        else:
            self._workflow_task(task)
        return True

    def _activity_done(self, t: asyncio.Task[Any]) -> None:
        self._running.discard(t)
        if not t.cancelled() and t.exception() is not None and self._crash is None:
            self._crash = t.exception()
        self.engine.wake.set()

    # -- workflow tasks --------------------------------------------------------------------------

    def _workflow_task(self, task: dict[str, Any]) -> None:
        wf, run_id, seq = task["workflow_id"], task["run_id"], task["scheduled_seq"]
        if wf in self.engine.broken:
            return  # its code failed: the run stays open, as on the real engine, and is not run again
        defn = self._workflows.get(task["workflow_type"])
        if defn is None:
            self._fail(
                task,
                "unknown_workflow_type",
                KadenceError(f"workflow type {task['workflow_type']!r} is not registered in this WorkflowEnvironment"),
            )
            return
        inst = self._instances.pop(wf, None)
        if inst is not None and (inst.info.run_id != run_id or task["full_history"]):
            inst.discard()
            inst = None
        if task["full_history"]:
            inst = WorkflowInstance(
                defn,
                WorkflowInfo(wf, run_id, task["workflow_type"], task["task_queue"], task["attempt"]),
                self.converter,
                self.interceptors,
                self._failure_types,
            )
        elif inst is None:
            self.engine.submit(
                wf,
                "RequestWorkflowHistory",
                {"scheduled_seq": seq, "identity": IDENTITY, "build_id": None},
                run_id=run_id,
            )
            return
        elif inst.last_seq >= seq:
            self._instances[wf] = inst  # a task answered already
            return
        try:
            commands = inst.apply(task["events"], seq)
            if inst.last_seq != seq:
                raise HistoryGapError(f"task ends at event {inst.last_seq}, expected {seq}")
        except HistoryGapError:
            inst.discard()
            self.engine.submit(
                wf,
                "RequestWorkflowHistory",
                {"scheduled_seq": seq, "identity": IDENTITY, "build_id": None},
                run_id=run_id,
            )
            return
        except Exception as exc:  # noqa: BLE001 - as a worker: the task fails, the test hears of it
            inst.discard()
            self._fail(task, task_failure_cause(exc), exc)
            return
        if inst.pending_local_activities():  # run them as a worker does, then complete the task
            t = asyncio.get_running_loop().create_task(self._with_local_activities(task, inst))
            self._running.add(t)
            t.add_done_callback(self._activity_done)
            return
        self._complete(task, inst, commands)

    def _complete(self, task: dict[str, Any], inst: WorkflowInstance, commands: list[Any]) -> None:
        wf = task["workflow_id"]
        self.engine.submit(
            wf,
            "RespondWorkflowTaskCompleted",
            {"scheduled_seq": task["scheduled_seq"], "commands": commands, "identity": IDENTITY, "build_id": None},
            run_id=task["run_id"],
        )
        if inst.closed:
            inst.discard()
        else:
            self._instances[wf] = inst

    async def _with_local_activities(self, task: dict[str, Any], inst: WorkflowInstance) -> None:
        try:
            await run_local_activities(
                inst,
                lambda call: run_local_activity(
                    call,
                    cast(WorkflowTask, task),
                    headers=inst.info.headers,
                    activities=self._activities,
                    converter=self.converter,
                    interceptors=self.interceptors,
                    call_sync=None,
                    task_queue=task["task_queue"],
                    where="this WorkflowEnvironment",
                    metrics=NO_METRICS,
                    stats=self.stats,
                ),
            )
        except asyncio.CancelledError:
            inst.discard()
            raise
        except Exception as exc:  # noqa: BLE001 - as a worker: the task fails, the test hears of it
            inst.discard()
            self._fail(task, task_failure_cause(exc), exc)
            return
        self._complete(task, inst, inst.commands())

    def _fail(self, task: dict[str, Any], cause: str, exc: BaseException) -> None:
        """Report the failed task as a worker does, and stop waiting for the workflow."""
        wf = task["workflow_id"]
        self.engine.submit(
            wf,
            "RespondWorkflowTaskFailed",
            {
                "scheduled_seq": task["scheduled_seq"],
                "cause": cause,
                "failure": self.converter.failure(exc),
                "identity": IDENTITY,
                "build_id": None,
            },
            run_id=task["run_id"],
        )
        error = WorkflowTaskFailedError(
            f"workflow {wf!r}: workflow task failed ({cause}): {exc}", workflow_id=wf, cause=cause
        )
        error.__cause__ = exc
        self.engine.mark_broken(error)

    def _answer_query(self, task: dict[str, Any]) -> None:
        """A query's answer, or an update's validation, as a worker gives them (``_queries``)."""
        wf = task["workflow_id"]
        reply, accept = answer(
            cast(WorkflowTask, task),
            self._workflows.get(task["workflow_type"]),
            self._instances.get(wf),
            self.converter,
            interceptors=self.interceptors,
            failure_types=self._failure_types,
        )
        if accept is not None:
            self.engine.submit(
                wf,
                "AcceptWorkflowUpdate",
                {**accept, "identity": IDENTITY},
                run_id=task["run_id"],
                request_id=task["query"]["request_id"],
            )
        else:
            assert reply is not None, "answer() gives a reply when it gives no acceptance"
            self.engine.reply(reply)

    # -- activities ------------------------------------------------------------------------------

    async def _run_activity(self, task: dict[str, Any]) -> None:
        if task["attempt"] > self.max_activity_attempts:
            wf = task["workflow_id"]
            self.engine.mark_broken(
                ActivityAttemptLimitError(
                    f"activity {task['activity_type']!r} ({task['activity_id']}) of workflow {wf!r} reached "
                    f"attempt {task['attempt']}, past this WorkflowEnvironment's max_activity_attempts="
                    f"{self.max_activity_attempts}: it fails every attempt. Give it a RetryPolicy with "
                    "maximum_attempts, raise ApplicationError(non_retryable=True), or raise the limit.",
                    workflow_id=wf,
                    activity_type=task["activity_type"],
                    attempt=task["attempt"],
                )
            )
            return
        common = {
            "activity_id": task["activity_id"],
            "scheduled_seq": task["scheduled_seq"],
            "attempt": task["attempt"],
            "identity": IDENTITY,
        }
        defn = self._activities.get(task["activity_type"])
        info = _activity.info_from_task(cast(ActivityTask, task), self.converter)
        loop = asyncio.get_running_loop()
        me = asyncio.current_task()
        assert me is not None, "activities run in a task of the environment's loop"
        loop_thread = threading.get_ident()

        def send_heartbeat(c: _activity.ActivityContext, details: Any) -> None:
            # in order with what the activity reports next (as a worker's produce is): at once
            # from the loop's thread, through the loop from a sync activity's or the throttle's
            if threading.get_ident() == loop_thread:
                self._heartbeat(task, c, details)
            else:
                loop.call_soon_threadsafe(self._heartbeat, task, c, details)

        ctx = _activity.ActivityContext(
            info,
            send_heartbeat,
            (lambda: loop.call_soon_threadsafe(me.cancel)) if defn is not None and defn.is_async else (lambda: None),
        )
        ctx.published, ctx.encode = PublishBuffer(), self.converter.to_bytes
        token = _activity._current.set(ctx)
        try:
            if defn is None:
                raise KadenceError(
                    f"activity type {task['activity_type']!r} is not registered in this WorkflowEnvironment"
                )
            args = self.converter.args_from_bytes(task["input"], defn.fn, what=f"activity {defn.name}")
            result = await invoke_activity(
                self.interceptors,
                defn,
                info,
                args,
                lambda fn, a: loop.run_in_executor(None, contextvars.copy_context().run, fn, *a),
            )
            body_type, body = (
                "RespondActivityTaskCompleted",
                {
                    **common,
                    "result": self.converter.to_bytes(result),
                    "eager_workflow_task": None,
                    "published": ctx.published.items,
                },
            )
        except _activity.CompleteAsyncError:
            return  # completed later through env.client.get_async_activity_handle
        except asyncio.CancelledError:
            if not ctx.cancelled.is_set():
                raise  # the environment is closing
            return  # cancelled by the workflow: the engine no longer waits for this attempt
        except Exception as exc:  # noqa: BLE001 - an activity's error is reported to the engine
            body_type, body = "RespondActivityTaskFailed", {**common, "failure": self.converter.failure(exc)}
        finally:
            ctx.close()
            _activity._current.reset(token)
        self.engine.submit(task["workflow_id"], body_type, body, run_id=task["run_id"])

    def _heartbeat(self, task: dict[str, Any], ctx: _activity.ActivityContext, details: Any) -> None:
        body = {
            "activity_id": task["activity_id"],
            "scheduled_seq": task["scheduled_seq"],
            "attempt": task["attempt"],
            "details": self.converter.to_bytes(details),
            "identity": IDENTITY,
        }

        def on_reply(reply: dict[str, Any]) -> None:
            if reply["status"] == "cancel_requested":
                ctx.cancel()

        self.engine.submit(
            task["workflow_id"],
            "RecordActivityHeartbeat",
            body,
            request_id=new_id(),
            run_id=task["run_id"],
            on_reply=on_reply,
        )
