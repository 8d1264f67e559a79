"""A worker's activity tasks: each attempt, from the activity-task topic or handed over in the
engine's reply (eager activities, decision 0054), run by the ``ActivityRunner`` and reported:
with its task's offset in the reporter's transaction (decision 0032), through the worker's
outbox, or, for an eager attempt, with a plain produce; and the heartbeats of a running attempt.
A result that cannot be sent is replaced by a failure the workflow sees."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import functools
import logging
from typing import TYPE_CHECKING, Any, cast

from confluent_kafka import Message

from kadence.schemas.records import ActivityTask
from kadence.topics import serde
from kadence.topics.errors import ApplicationError, SchemaError
from kadence.topics.log_context import reset_log_fields, set_log_fields
from kadence.topics.payload import failure_from_exception
from kadence.topics.priority import LANE_WEIGHTS
from kadence.topics.records import new_id
from kadence.topics.tracing import record_ref

from ._lane_traffic import LaneTraffic
from ._rate_limit import QueueRateLimiter
from ._reporter import ActivityReporter
from ._task_consumer import TaskConsumer
from .activity import ActivityContext

if TYPE_CHECKING:
    from ._worker import Worker

__all__ = ["ActivityTasks"]

log = logging.getLogger(__name__)


class ActivityTasks:
    """The activity side of one ``Worker`` (which it reads for the client, the runner, the
    reporter, the outbox and the cached workflow instances)."""

    def __init__(self, worker: Worker) -> None:
        self.w = worker
        #: the activity consumer's pace: the queue's rate limits (``_rate_limit``), once started
        self.limiter: QueueRateLimiter | None = None
        #: how fast each priority lane grows, for the limiter's share (``_lane_traffic``)
        self._traffic: LaneTraffic | None = None

    async def start_consumer(self, topics: Any) -> bool:
        """The activity-task consumer, paced by the queue's rate limits (read to date first), and
        the reporter of its transactions. False when shut down meanwhile."""
        w, loop = self.w, asyncio.get_running_loop()
        at_topic = topics.activity_tasks(w.task_queue)
        # every priority lane of the queue, weighted (decision 0060); the default lane is at_topic
        lanes = {topic: float(LANE_WEIGHTS[level]) for level, topic in topics.activity_lanes(w.task_queue)}
        limiter = QueueRateLimiter.following(
            w.client.config, topics.queue_limits, w.task_queue, on_throttled=w.metrics.rate_limited
        )
        self.limiter = limiter

        def read_limits() -> None:
            partitions = topics.partitions_of(at_topic)
            limiter.set_partitions(set(), partitions * len(lanes), len(lanes))
            limiter.start()
            self._traffic = LaneTraffic(w.client.config, list(lanes), partitions, limiter)
            self._traffic.start()

        if not await w._until_broker_answers(f"reading the limits of task queue {w.task_queue}", read_limits):
            self.close()  # shut down meanwhile: nothing else was started
            return False
        w._eager_activities.paced = limiter.limits_type
        w._at_consumer = TaskConsumer(
            w,
            at_topic,
            topics.worker_group(w.task_queue, "activity"),
            self.on_task,
            w._max_activities,
            transactional=w._txn_results,
            slots=w._slots,
            limiter=limiter,
            lanes=lanes,
            read_ahead=w._activity_read_ahead,
        )
        w._consumers.append(w._at_consumer)
        if w._txn_results:
            w._reporter = ActivityReporter(
                config=w.client.config,
                topics=topics,
                consumer=w._at_consumer,
                identity=w.identity,
                on_unsendable=self.failed_instead_from_thread,
                stall_s=w._txn_stall_s,
            )
            await loop.run_in_executor(None, w._reporter.start)
        return True

    def close(self) -> None:
        """After the consumer has stopped: the limits reader."""
        if self._traffic is not None:
            self._traffic.close()
            self._traffic = None
        if self.limiter is not None:
            self.limiter.close()
            self.limiter = None

    def on_task(self, msg: Message) -> None:
        try:
            task = cast(ActivityTask, serde.decode("ActivityTask", msg.value()))
        except SchemaError as exc:
            log.error("undecodable activity task at %s[%d]@%d: %s", msg.topic(), msg.partition(), msg.offset(), exc)
            self.w._live_at_consumer.done(msg)
            return
        self.start(task, msg)

    def start(self, task: ActivityTask, msg: Message | None) -> None:
        """Run an attempt from the task topic (``msg``) or from the engine's reply to a
        completion that asked for it (``msg`` None: ``_eager_activities``)."""
        # the activity's task copies the context as it is created: its lines carry the fields
        partition = None if msg is None else msg.partition()
        fields = set_log_fields(task["workflow_id"], task["run_id"], partition, task.get("trace_id"))
        try:
            t = asyncio.get_running_loop().create_task(self._run(task, msg))
        finally:
            reset_log_fields(fields)
        self.w._running.add(t)
        t.add_done_callback(self.w._running.discard)
        if msg is None:  # its slot was taken when it was asked for
            t.add_done_callback(lambda _t: self.w._eager_activities.done())

    async def _run(self, task: ActivityTask, msg: Message | None) -> None:
        parent = record_ref(task)
        if parent is None:
            await self._attempt(task, msg)
            return
        # current while the activity runs: its own spans (an HTTP call's) nest under it
        with self.w._tracer.child(
            f"kadence.activity {task['activity_type']}",
            parent,
            self.w._span_attributes(task),
            kind="internal",
            current=True,
        ) as ref:
            task["span_id"] = ref[1]
            await self._attempt(task, msg)

    async def _attempt(self, task: ActivityTask, msg: Message | None) -> None:
        reported = await self.w._activity_runner.run(task, self.heartbeat)
        if reported is None:  # cancelled by the engine, or to be completed asynchronously
            if msg is not None:
                self.w._live_at_consumer.done(msg)
            return
        body_type, body = reported
        request_id = new_id()
        if body_type == "RespondActivityTaskCompleted" and self.w._eager:
            eager = body["eager_workflow_task"] = self.w._eager_task(task, body["result"], request_id)
            if eager is not None:
                eager["commands"] = self.w._eager_activities.ask(task["workflow_id"], request_id, eager["commands"])
        if msg is None:  # no offset to commit with it: a plain produce (decision 0054)
            self._report_eager(task, body_type, body, request_id)
        elif self.w._reporter is not None:
            self.w._reporter.report(
                task["workflow_id"], task["run_id"], body_type, body, request_id, msg, record_ref(task)
            )
        else:
            self.w._send(task, body_type, body, msg, self.w._live_at_consumer, request_id)

    def _report_eager(self, task: ActivityTask, body_type: str, body: dict[str, Any], request_id: str) -> None:
        """Report an eager activity's attempt (``_eager_activities``): lost on the way, it is
        retried after its timeout, as the attempt of a worker that died."""
        wf = task["workflow_id"]
        try:
            fut = self.w.client.engine.send(
                wf,
                body_type,
                body,
                request_id=request_id,
                run_id=task["run_id"],
                expect_reply=False,
                trace=record_ref(task),
            )
        except Exception as exc:  # noqa: BLE001 - e.g. a result over the producer's size limit
            log.error("command %s for %s could not be produced: %s", body_type, wf, exc)
            instead = self.unsendable_result(task, body_type, body, exc)
            if instead is None:
                return
            fut = instead
        fut.add_done_callback(functools.partial(_log_undelivered, wf))

    def failed_instead(
        self, workflow_id: str, body_type: str, body: dict[str, Any], exc: Exception
    ) -> tuple[Any, ...] | None:
        """An activity whose result cannot be sent fails, without retries (the result would not
        fit the next time either), so that its workflow sees an error instead of waiting: the
        command to send instead, or None (not an activity result)."""
        if body_type != "RespondActivityTaskCompleted":
            return None
        if body.get("eager_workflow_task") is not None:  # the instance ran ahead on a result never sent
            self.w._forget(workflow_id)
        failure = failure_from_exception(
            ApplicationError(
                f"the activity's result could not be sent to the engine: {exc}",
                type="ResultNotSent",
                non_retryable=True,
            )
        )
        return "RespondActivityTaskFailed", (
            {k: v for k, v in body.items() if k not in ("result", "eager_workflow_task")} | {"failure": failure}
        )

    def failed_instead_from_thread(
        self, workflow_id: str, body_type: str, body: dict[str, Any], exc: Exception
    ) -> tuple[Any, ...] | None:
        """``failed_instead`` for the reporter's thread: the instance cache is the loop's."""
        if body.get("eager_workflow_task") is not None:
            loop = self.w._live_at_consumer._loop
            loop.call_soon_threadsafe(self.w._forget, workflow_id)
            body = {**body, "eager_workflow_task": None}
        return self.failed_instead(workflow_id, body_type, body, exc)

    def unsendable_result(
        self, task: ActivityTask, body_type: str, body: dict[str, Any], exc: Exception
    ) -> cf.Future[Any] | None:
        instead = self.failed_instead(task["workflow_id"], body_type, body, exc)
        if instead is None:
            return None
        failed = instead[1]
        try:
            return self.w.client.engine.send(
                task["workflow_id"],
                "RespondActivityTaskFailed",
                failed,
                request_id=new_id(),
                run_id=task["run_id"],
                expect_reply=False,
                trace=record_ref(task),
            )
        except Exception as again:  # noqa: BLE001
            log.error(
                "failure of activity %s of %s could not be produced either: %s",
                task["activity_id"],
                task["workflow_id"],
                again,
            )
            return None

    def heartbeat(self, task: ActivityTask, ctx: ActivityContext, details: Any) -> None:
        """Send a heartbeat (any thread); a reply that says stop cancels the activity."""
        body = {
            "activity_id": task["activity_id"],
            "scheduled_seq": task["scheduled_seq"],
            "attempt": task["attempt"],
            "details": self.w.client.converter.to_bytes(details),
            "identity": self.w.identity,
        }
        fut = self.w.client.engine.send(
            task["workflow_id"],
            "RecordActivityHeartbeat",
            body,
            request_id=new_id(),
            run_id=task["run_id"],
            trace=record_ref(task),
        )
        self.w.stats["heartbeats"] += 1
        self.w.metrics.heartbeats.inc()

        def on_reply(f: cf.Future[Any]) -> None:
            if not f.cancelled() and f.exception() is None and f.result()["status"] == "cancel_requested":
                ctx.cancel()

        fut.add_done_callback(on_reply)


def _log_undelivered(workflow_id: str, fut: cf.Future[Any]) -> None:
    if fut.exception() is not None:
        log.error("command for %s not delivered: %s", workflow_id, fut.exception())
