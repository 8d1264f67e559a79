"""The worker: consumes a task queue's workflow and activity tasks and runs user code.

Workflow tasks are applied to cached ``WorkflowInstance`` objects (stickiness comes from the
partition assignment of the task topic); a worker that does not hold a workflow's state asks the
engine for its full history instead of guessing. Activities run concurrently (async ones on the
worker's loop, sync ones in a thread pool); a slow activity never blocks the ones behind it,
because offsets are committed only up to the lowest task still running.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures as cf
import functools
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from confluent_kafka import Message
from opentelemetry.trace import TracerProvider
from prometheus_client import CollectorRegistry

from kadence.schemas.records import ActivityTask, EagerWorkflowTask, StartWorkflow, WorkflowTask
from kadence.topics.broker_wait import until_broker_answers
from kadence.topics.builds import promote_build, validate_build_id
from kadence.topics.codec_metrics import register_codec_metrics
from kadence.topics.errors import (
    BrokerUnavailableError,
    ConfigError,
    DefinitionError,
    WorkerCrashedError,
)
from kadence.topics.identifiers import check_task_queue
from kadence.topics.priority import LANE_WEIGHTS
from kadence.topics.records import new_id, now_ms
from kadence.topics.tracing import Tracer, record_ref

from ._activity_runner import ActivityRunner
from ._activity_tasks import ActivityTasks
from ._client import Client
from ._definitions import failure_types, registrations
from ._eager_activities import EagerActivities
from ._eager_start import run_first_task
from ._instance import WorkflowInstance
from ._loop import install_guard
from ._query_tasks import QueryTasks
from ._reporter import ActivityReporter
from ._slots import Slots
from ._task_consumer import TaskConsumer
from ._worker_metrics import NO_METRICS, WorkerMetrics
from ._workflow_tasks import WorkflowTasks
from .interceptors import Interceptor

__all__ = ["Worker"]

log = logging.getLogger(__name__)


def _checked_numbers(txn_stall_s: float, graceful: timedelta | float, read_ahead: int) -> float:
    """The graceful shutdown's seconds, the numeric options checked (``DefinitionError`` or
    ``ConfigError`` for a bad one)."""
    if txn_stall_s <= 0:
        raise DefinitionError("txn_stall_s must be > 0")
    graceful_s = graceful.total_seconds() if isinstance(graceful, timedelta) else float(graceful)
    if graceful_s < 0:
        raise DefinitionError("graceful_shutdown_timeout must be >= 0")
    if isinstance(read_ahead, bool) or not isinstance(read_ahead, int) or read_ahead < 1:
        raise ConfigError(f"activity_read_ahead must be a positive int, not {read_ahead!r}")
    return graceful_s


class Worker:
    """Runs workflows and activities of one task queue::

        async with Worker(client, task_queue="orders", workflows=[Order], activities=[charge]):
            ...

    or ``await worker.run()`` until ``worker.shutdown()``.

    ``build_id`` declares the build of the workflow code this worker runs: it then runs only the
    workflow tasks of runs pinned to that build (a run stays on the build it started on), from
    the build's own topic; activities are shared by every build of the queue. ``promote=True``
    makes the build the queue's default when the worker starts: new workflows start on it.
    Without ``build_id`` the worker runs the queue's unversioned workflows, as before.

    ``eager_workflow_tasks`` (default on): when an activity completes for a workflow whose
    instance this worker holds, the worker runs the workflow's next task at once and sends it
    with the result, one command instead of two round trips through the engine; the engine
    records it only if nothing else happened to the workflow meanwhile (decision 0031).

    ``txn_stall_s`` (default 60): an activity-results transaction call blocked longer than this
    (librdkafka #5511) has its producer replaced and its results committed again by a new
    thread, instead of leaving the worker's activity slots full for good.

    ``activity_read_ahead`` (default 10,000, and at most 16 MiB of records): activity tasks read
    ahead of the free slots, per priority lane; among them the next task is chosen by priority and fairness key
    (docs/guide.md, "Priority and fairness"). A lane with more waiting stops fetching until
    they start; its tasks beyond wait in Kafka in the order they came.
    """

    def __init__(
        self,
        client: Client,
        *,
        task_queue: str,
        workflows: Iterable[type] = (),
        activities: Iterable[Any] = (),
        max_concurrent_activities: int = 100,
        max_cached_workflows: int = 10_000,
        session_timeout_ms: int = 10_000,
        identity: str | None = None,
        build_id: str | None = None,
        promote: bool = False,
        eager_workflow_tasks: bool = True,
        eager_activities: bool = True,
        transactional_activity_results: bool = True,
        txn_stall_s: float = 60.0,
        metrics_registry: CollectorRegistry | None = None,
        tracer_provider: TracerProvider | None = None,
        interceptors: Iterable[Interceptor] = (),
        workflow_failure_exception_types: Iterable[type[BaseException]] = (),
        activity_executor: cf.Executor | None = None,
        graceful_shutdown_timeout: timedelta | float = 0,
        activity_read_ahead: int = 10_000,
    ) -> None:
        check_task_queue(task_queue)
        self._graceful_s = _checked_numbers(txn_stall_s, graceful_shutdown_timeout, activity_read_ahead)
        #: besides ``FailureError`` and each workflow's own ``failure_exception_types``: what fails
        #: a run when its code raises it (anything else fails the workflow task, retried until fixed)
        self._failure_types = failure_types(workflow_failure_exception_types, "Worker")
        #: the client's interceptors, then these (``kadence.interceptors``): around each activity
        #: attempt and each workflow handler this worker runs
        self.interceptors: tuple[Interceptor, ...] = (*client.interceptors, *interceptors)
        #: spans of traced tasks (``topics.tracing``; None: the global tracer provider)
        self._tracer = Tracer("worker", tracer_provider)
        self.build_id = validate_build_id(build_id, allow_none=True)
        if promote and build_id is None:
            raise DefinitionError("promote=True needs a build_id")
        self._promote = promote
        self.client = client
        self.task_queue = task_queue
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.session_timeout_ms = session_timeout_ms
        self._workflows, self._activities = registrations(workflows, activities)
        if self._workflows:
            install_guard()
        self._max_activities = max_concurrent_activities
        #: activity tasks read ahead per priority lane (ordered by priority and fairness key)
        self._activity_read_ahead = activity_read_ahead
        self._eager = eager_workflow_tasks
        #: activity results and their tasks' offsets in one transaction (``_reporter``)
        self._txn_results = transactional_activity_results
        self._txn_stall_s = txn_stall_s
        self._reporter: ActivityReporter | None = None
        self._max_cached = max_cached_workflows
        self._cache: collections.OrderedDict[str, WorkflowInstance] = collections.OrderedDict()
        self._consumers: list[TaskConsumer] = []
        self._stopped: asyncio.Event | None = None
        self._running: set[asyncio.Task[Any]] = set()
        #: commands of finished tasks, produced together at the next turn of the loop (``_send``)
        self._outbox: list[tuple[Any, ...]] = []
        self._runner: asyncio.Task[Any] | None = None
        self._wt_consumer: TaskConsumer | None = None
        self._at_consumer: TaskConsumer | None = None
        #: counters, for tests
        self.stats: collections.Counter[str] = collections.Counter()
        #: Prometheus metrics, in ``metrics_registry``; none without one (``_worker_metrics``)
        self.metrics = (
            NO_METRICS
            if metrics_registry is None
            else WorkerMetrics(metrics_registry).for_queue(client.config.namespace, task_queue)
        )
        if metrics_registry is not None:  # per process, not per namespace: the codecs are shared
            register_codec_metrics(metrics_registry)
        #: runs the activity attempts (``_activity_runner``): sync ones in ``activity_executor``,
        #: or in daemon threads of its own
        self._activity_runner = ActivityRunner(
            self._activities,
            client.converter,
            self.interceptors,
            executor=activity_executor,
            max_concurrent=max_concurrent_activities,
            metrics=self.metrics,
            stats=self.stats,
            identity=self.identity,
            where=f"worker {self.identity} (task queue {task_queue})",
        )
        #: each activity attempt, run and reported (``_activity_tasks``)
        self._activity_tasks = ActivityTasks(self)
        self._workflow_tasks = WorkflowTasks(self)
        #: queries and update validations (``_query_tasks``)
        self._queries = QueryTasks(self)
        #: max_concurrent_activities, taken by the activity-task consumer and eager activities alike
        self._slots = Slots(max_concurrent_activities)
        #: activities this worker's workflow tasks schedule, run when the engine's reply says so
        self._eager_activities = EagerActivities(
            engine=client.engine,
            task_queue=task_queue,
            activities=self._activities,
            slots=self._slots,
            start=functools.partial(self._activity_tasks.start, msg=None),
            stats=self.stats,
            enabled=eager_activities,
        )
        #: set by shutdown(): a start still waiting for the broker gives up
        self._starting_stop = threading.Event()
        self._serving = False
        self._serving_event = asyncio.Event()
        #: why a task consumer's thread ended, if it did (``_consumer_died``)
        self._died: WorkerCrashedError | None = None

    @property
    def started(self) -> bool:
        """Whether ``run()`` got past waiting for the broker and polls its task queue (what
        ``kadence worker --metrics-port``'s ``/readyz`` reports)."""
        return self._serving

    async def wait_started(self, timeout: float | None = None) -> None:
        """Until ``started`` (``TimeoutError`` after ``timeout`` seconds): a worker runs the
        first task of its client's eager starts only from then on."""
        await asyncio.wait_for(self._serving_event.wait(), timeout)

    # -- lifecycle -----------------------------------------------------------------------------

    async def _until_broker_answers(self, what: str, step: Callable[[], object]) -> bool:
        """``step()`` on a thread, retried with backoff while the broker does not answer (a worker
        restarted during a broker restart exited here, in a chaos seed). False when the worker
        was shut down (or cancelled) before it succeeded."""
        try:
            await asyncio.get_running_loop().run_in_executor(
                None,
                lambda: until_broker_answers(
                    step, what=what, who=f"worker {self.identity}", stop=self._starting_stop, log=log
                ),
            )
            return True
        except BrokerUnavailableError:
            if self._starting_stop.is_set():
                return False
            raise
        except asyncio.CancelledError:
            self._starting_stop.set()  # the thread's next retry gives up
            raise

    async def run(self) -> None:
        self._stopped = asyncio.Event()
        topics = self.client.engine.topics
        loop = asyncio.get_running_loop()
        if self.build_id is None:
            ready = await self._until_broker_answers(
                f"creating the topics of task queue {self.task_queue}", lambda: topics.ensure_queue(self.task_queue)
            )
            wt_topic, wt_group = (
                topics.workflow_tasks(self.task_queue),
                topics.worker_group(self.task_queue, "workflow"),
            )
        else:
            build_id = self.build_id
            ready = await self._until_broker_answers(
                f"creating the topics of build {build_id}",
                lambda: topics.ensure_build(self.task_queue, build_id),
            )
            wt_topic = topics.build_tasks(self.task_queue, build_id)
            wt_group = topics.build_group(self.task_queue, self.build_id)
        if not ready:  # shut down while waiting for the broker: nothing was started
            self._activity_runner.close_unstarted()
            return
        if self._workflows:
            # every priority lane of the queue's (or the build's) workflow tasks (decision 0060)
            lanes = {
                t: float(LANE_WEIGHTS[level]) for level, t in topics.workflow_lanes(self.task_queue, self.build_id)
            }
            self._wt_consumer = TaskConsumer(self, wt_topic, wt_group, self._workflow_tasks.on_task, 1000, lanes=lanes)
            self._consumers.append(self._wt_consumer)
        if self._activities and not await self._activity_tasks.start_consumer(topics):
            self._activity_runner.close_unstarted()
            return
        for c in self._consumers:
            c.start()
        await self._eager_activities.start()
        if self._promote:
            await loop.run_in_executor(
                None, lambda: promote_build(self.client.config, self.task_queue, self.build_id, identity=self.identity)
            )
        log.info(
            "worker %s serving task queue %s (build %s)", self.identity, self.task_queue, self.build_id or "unversioned"
        )
        self._serving = True
        self._serving_event.set()
        self.client._workers.add(self)  # it may run the first task of the client's eager starts
        try:
            await self._stopped.wait()
        finally:
            self.client._workers.discard(self)
            self._serving = False
            self._serving_event.clear()
            await self._close()
        if self._died is not None:
            raise self._died

    async def _close(self) -> None:
        loop = asyncio.get_running_loop()
        await self._eager_activities.close()
        if self._at_consumer is not None:
            self._at_consumer.stop_taking()
        # the activities running: cancelled, and given the graceful timeout to end (what they
        # report meanwhile is reported: the reporter and the consumers still run)
        await self._activity_runner.shutdown(self._graceful_s)
        self._flush_outbox()  # before the consumers stop: their offsets advance on delivery
        if self._reporter is not None:  # commits what is queued, while the task consumer still runs
            await loop.run_in_executor(None, self._reporter.stop)
            self._reporter = None
        for c in self._consumers:
            await loop.run_in_executor(None, c.stop)
        self._activity_tasks.close()
        for t in list(self._running):
            t.cancel()
        self._consumers.clear()
        for inst in self._cache.values():
            inst.discard()
        self._cache.clear()

    def shutdown(self) -> None:
        self._starting_stop.set()
        if self._stopped is not None:
            self._stopped.set()

    def _consumer_died(self, topic: str, exc: BaseException) -> None:
        """A task consumer's thread ended on an error: stop, and let ``run()`` raise it (a worker
        that polls no more tasks must not look alive; ``kadence worker`` then exits 1 and its
        supervisor starts it again)."""
        if self._died is None:
            self._died = WorkerCrashedError(f"task consumer {topic} crashed: {exc!r}")
        self.shutdown()

    async def __aenter__(self) -> Worker:
        self._runner = asyncio.get_running_loop().create_task(self.run())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.shutdown()
        if self._runner is not None:
            await self._runner

    # -- sending commands ----------------------------------------------------------------------

    def _send(
        self,
        task: WorkflowTask | ActivityTask,
        body_type: str,
        body: dict[str, Any],
        msg: Message,
        consumer: TaskConsumer,
        request_id: str | None = None,
    ) -> None:
        """Queue a task's command; the queue is produced at the next turn of the event loop.

        Under load many tasks finish in one turn of the loop (the consumer hands them over in
        bursts), and producing their commands together lets librdkafka put several in one
        Produce request per partition instead of one request each (decision 0028). At light
        load a command waits for nothing: the next turn comes at once."""
        self._outbox.append((task, body_type, body, msg, consumer, request_id or new_id()))
        if len(self._outbox) == 1:
            asyncio.get_running_loop().call_soon(self._flush_outbox)

    def _flush_outbox(self) -> None:
        batch, self._outbox = self._outbox, []
        engine = self.client.engine
        for task, body_type, body, msg, consumer, request_id in batch:
            try:
                fut = engine.send(
                    task["workflow_id"],
                    body_type,
                    body,
                    request_id=request_id,
                    run_id=task["run_id"],
                    expect_reply=False,
                    trace=record_ref(task),
                )
            except Exception as exc:  # noqa: BLE001 - e.g. a result over the producer's size limit
                # one bad command must not keep the others of its turn from Kafka
                log.error("command %s for %s could not be produced: %s", body_type, task["workflow_id"], exc)
                instead = self._activity_tasks.unsendable_result(task, body_type, body, exc)
                if instead is None:  # given up, like a task that fails in the worker
                    consumer.done(msg)
                    continue
                fut = instead
            fut.add_done_callback(functools.partial(self._sent, task["workflow_id"], msg, consumer))

    @staticmethod
    def _sent(workflow_id: str, msg: Message, consumer: TaskConsumer, fut: cf.Future[Any]) -> None:
        if fut.exception() is None:
            consumer.done(msg)
        else:
            log.error("command for %s not delivered: %s", workflow_id, fut.exception())

    # -- workflow tasks ------------------------------------------------------------------------

    @property
    def _live_wt_consumer(self) -> TaskConsumer:
        """The workflow-task consumer of a running worker (made before any task arrives)."""
        assert self._wt_consumer is not None, "the worker has no workflow-task consumer"
        return self._wt_consumer

    @property
    def _live_at_consumer(self) -> TaskConsumer:
        """The activity-task consumer of a running worker (made before any task arrives)."""
        assert self._at_consumer is not None, "the worker has no activity-task consumer"
        return self._at_consumer

    def _keep(self, workflow_id: str, inst: WorkflowInstance) -> None:
        """Cache the instance for the workflow's next task (a closed one is dropped)."""
        if inst.closed:
            inst.discard()
            return
        previous = self._cache.pop(workflow_id, None)
        if previous is not None and previous is not inst:
            previous.discard()
        self._cache[workflow_id] = inst
        while len(self._cache) > self._max_cached:
            _, old = self._cache.popitem(last=False)
            old.discard()

    # -- eager workflow start (``topics.eager_start.EagerStarter``) -------------------------------

    def serves(self, namespace: str, task_queue: str, workflow_type: str) -> bool:
        """Whether this worker runs ``workflow_type``'s workflow tasks on ``task_queue`` of
        ``namespace`` now."""
        return (
            self._serving
            and namespace == self.client.config.namespace
            and task_queue == self.task_queue
            and workflow_type in self._workflows
        )

    async def run_first_task(
        self, workflow_id: str, run_id: str, body: StartWorkflow, request_id: str
    ) -> EagerWorkflowTask | None:
        """Run the first workflow task of an eager start of ``run_id`` (``_eager_start``)."""
        return await run_first_task(self, workflow_id, run_id, body, request_id)

    def forget_eager(self, workflow_id: str, run_id: str) -> None:
        """The engine did not take the first task this worker ran for an eager start of
        ``run_id``: its instance ran ahead on a history that did not happen."""
        inst = self._cache.get(workflow_id)
        if inst is not None and inst.info.run_id == run_id and inst.eager_token is not None:
            self._forget(workflow_id)
            self.stats["eager_discarded"] += 1

    def _span_attributes(self, task: WorkflowTask | ActivityTask) -> dict[str, Any]:
        # few attributes: each costs ~10 us a span in the SDK and its exporter (docs/performance.md)
        return {"kadence.workflow_id": task["workflow_id"], "kadence.attempt": task["attempt"]}

    def _eager_task(self, task: ActivityTask, result: bytes, request_id: str) -> dict[str, Any] | None:
        """Run the workflow's next task now, on the cached instance (decision 0031), or None."""
        wf = task["workflow_id"]
        inst = self._cache.get(wf)
        if inst is None or inst.info.run_id != task["run_id"] or not inst.can_run_eager():
            return None
        try:
            follows, at, commands = inst.run_eager(
                task["activity_id"], task["scheduled_seq"], task["attempt"], result, now_ms(), request_id
            )
        except Exception as exc:  # noqa: BLE001 - the ordinary workflow task will meet (and report) it
            log.debug("workflow %s run %s: eager workflow task not run: %s", wf, task["run_id"], exc)
            self._forget(wf)
            return None
        if inst.closed:
            self._forget(wf)
        self.stats["eager_workflow_tasks"] += 1
        return {**follows, "workflow_time_ms": at, "commands": commands, "build_id": self.build_id}

    def _forget(self, workflow_id: str) -> None:
        inst = self._cache.pop(workflow_id, None)
        if inst is not None:
            inst.discard()
