"""Activity results and their tasks' consumed offsets, committed in one Kafka transaction.

Without this, a worker reported an activity's result, then stored its task's offset for a
periodic auto-commit; a worker killed between the two had its task delivered again and the
activity ran again (3 of 6 tries in issue 15: attempt 1, same key, the engine dropping the
second result, the business effect repeated unless the activity used its idempotency key).

Here every batch of results is one transaction: the ``RespondActivityTask*`` commands and, for
each partition of the activity-task topic, the offset that is safe to commit (the lowest task
still running) plus, in the offset's commit metadata, the tasks above it that have reported
(activities finish out of order). A worker that gets a partition reads that metadata and skips
the tasks it names: a crash redelivers only the activities that had not reported.

``send_offsets_to_transaction`` also makes the group coordinator check the consumer's
generation, so a worker paused past its session timeout cannot commit offsets for tasks that
have moved on; its results are still sent, in a transaction without those offsets (the engine
accepts a result only for the attempt it waits for).

A transaction call that blocks past ``stall_s`` (librdkafka #5511: seen in a ``make chaos`` seed,
a worker that lived through a broker restart sat in ``commit_transaction(30)`` for minutes, its
activity slots full, its partitions' activities timing out one attempt after another) is left
behind: a new producer with the same transactional ID fences the old one (the broker aborts its
transaction), and a new thread commits the same batch again. The abandoned thread, if its call
ever returns, sees that it was replaced and ends without touching anything.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition

from kadence.topics import serde
from kadence.topics.catalogue import Catalogue
from kadence.topics.config import KafkaConfig
from kadence.topics.errors import SchemaError
from kadence.topics.produce import produce_waiting
from kadence.topics.records import command
from kadence.topics.transactions import GuardedCall, TxnCallHung, TxnWatchdog, start_transactional

if TYPE_CHECKING:
    from ._task_consumer import TaskConsumer

__all__ = ["ActivityReporter", "decode_reported", "encode_reported"]

log = logging.getLogger(__name__)

#: commit metadata is limited by the broker (offset.metadata.max.bytes, 4096 by default)
_METADATA_MAX = 3500
_PREFIX = "kr1:"
#: a batch whose offsets were refused this many times is committed without them
_TRIES_WITH_OFFSETS = 3


def encode_reported(position: int, reported: list[int]) -> str:
    """The commit metadata naming the reported tasks above ``position`` (as distances from it);
    what does not fit is left out (those tasks would run again after a crash, as before)."""
    if not reported:
        return ""
    out, size = [], len(_PREFIX)
    for offset in reported:
        item = str(offset - position)
        if size + len(item) + 1 > _METADATA_MAX:
            break
        out.append(item)
        size += len(item) + 1
    return _PREFIX + ",".join(out)


def decode_reported(position: int, metadata: str | None) -> set[int]:
    """The offsets ``encode_reported`` named (nothing for metadata it did not write)."""
    if not metadata or not metadata.startswith(_PREFIX) or position < 0:
        return set()
    try:
        return {position + int(d) for d in metadata[len(_PREFIX) :].split(",") if d}
    except ValueError:
        return set()


class ActivityReporter:
    """A thread that commits activity results with their offsets (one transaction per batch).

    ``report`` queues a command; the thread takes everything queued, commits it, then calls
    ``consumer.done(msg)`` for each task. With nothing to report it still commits, once a
    second, offsets that advanced without a result (tasks skipped or given up)."""

    def __init__(
        self,
        *,
        config: KafkaConfig,
        topics: Catalogue,
        consumer: TaskConsumer,
        identity: str,
        on_unsendable: Callable[[str, str, dict[str, Any], Exception], tuple[Any, ...] | None],
        stall_s: float = 60.0,
        hang_s: float = 4.0,
    ) -> None:
        self._config = config
        self._topics = topics
        self._consumer = consumer
        self._txn_id = f"{config.namespace}.worker.{identity}.activities"
        self._on_unsendable = on_unsendable
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._producer: Producer | None = None
        self._committed: dict[int, tuple[int, str | None]] = {}
        #: generation -> the results its thread took from the queue and has not committed yet
        #: (one list per thread: a thread replaced while blocked cannot touch its successor's)
        self._carry: dict[int, list[Any]] = {}
        self._codec = serde.topic_codec("Command", topics.commands, config.schema_registry_url)
        #: the current thread's generation; a thread whose generation is older was replaced
        self._generation = 0
        self._thread: threading.Thread | None = None
        self.stall_s = stall_s
        self._watchdog: TxnWatchdog | None = None
        self.transactions = 0
        self.aborts = 0
        #: how many times a blocked transaction's thread and producer were replaced
        self.takeovers = 0
        #: ``send_offsets_to_transaction`` runs on a helper thread and is given up after
        #: ``hang_s`` (doubling after each hang): the producer is replaced and the batch committed
        #: again by the same thread (decision 0035); the watchdog's takeover covers the other calls
        self._guarded = GuardedCall(f"kadence-reporter-{identity}", base_s=hang_s)
        #: how many times ``send_offsets_to_transaction`` was given up on
        self.hangs = 0

    def start(self) -> None:
        self._producer = self._make_producer()
        self._start_thread()

    def _start_thread(self) -> None:
        generation = self._generation
        self._watchdog = TxnWatchdog(self.stall_s, self._take_over)
        self._watchdog.start()
        self._thread = threading.Thread(
            target=self._run, args=(generation,), name="kadence-activity-reporter", daemon=True
        )
        self._thread.start()

    def _take_over(self, blocked_s: float) -> None:
        """The watchdog's: the current thread is blocked in a transaction call; fence its
        producer with a new one and let a new thread commit its batch again."""
        blocked = self._generation
        self._generation += 1  # the blocked thread is abandoned from here on
        batch = list(self._carry.pop(blocked, []))
        self._carry[self._generation] = batch
        log.warning(
            "activity reporter %s: a transaction call has been blocked for %.0f s (librdkafka #5511); "
            "replacing its producer and committing its %d results again",
            self._txn_id,
            blocked_s,
            len(batch),
        )
        self.takeovers += 1
        self._producer = self._make_producer()  # init_transactions fences the blocked producer
        self._start_thread()

    def _current(self, generation: int) -> bool:
        return generation == self._generation

    def _make_producer(self) -> Producer:
        conf = self._config.transactional_producer(
            self._txn_id, **{"transaction.timeout.ms": 10_000, "retry.backoff.ms": 10}
        )
        return start_transactional(lambda: Producer(conf), what=f"activity reporter {self._txn_id}")

    def report(
        self,
        workflow_id: str,
        run_id: str,
        body_type: str,
        body: dict[str, Any],
        request_id: str,
        msg: Message,
        trace: tuple[str, str] | None = None,
    ) -> None:
        """Queue one task's command (any thread); ``trace``: its context (``topics.tracing``)."""
        self._queue.put((workflow_id, run_id, body_type, body, request_id, trace, msg))

    def stop(self) -> None:
        """Commit what is queued, then end the thread (before the task consumer closes)."""
        self._stop.set()
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(30)
        if self._watchdog is not None:
            self._watchdog.stop()
        self._guarded.close()
        if self._producer is not None:
            self._producer.flush(5)

    def _take(self) -> list[Any]:
        items: list[Any] = []
        try:
            first = self._queue.get(timeout=1.0)
        except queue.Empty:
            return items
        while True:
            if first is not None:
                items.append(first)
            try:
                first = self._queue.get_nowait()
            except queue.Empty:
                return items

    def _run(self, generation: int) -> None:
        while self._current(generation):
            try:
                if self._step(generation):
                    return
            except Exception:
                log.exception("activity reporter: unexpected error; going on")
                time.sleep(0.5)

    def _step(self, generation: int) -> bool:
        """One batch; True when stopped and everything queued was committed. Results taken from
        the queue stay in ``_carry`` until their transaction commits."""
        items = self._carry.setdefault(generation, [])
        items.extend(self._take())
        offsets = self._consumer.commit_offsets({((m.topic(), m.partition()), m.offset()) for *_x, m in items})
        changed = [tp for tp in offsets if self._committed.get(tp.partition) != (tp.offset, tp.metadata)]
        if items or changed:
            if not self._commit(items, generation):
                return True  # replaced while blocked: the new thread has the batch
            items.clear()
        return self._stop.is_set() and self._queue.empty()

    def _commit(self, items: list[Any], generation: int) -> bool:
        """Commit ``items``; False if this thread was replaced meanwhile (nothing more to do)."""
        backoff = 0.05
        watchdog = self._watchdog
        assert watchdog is not None, "the reporter is started"
        for attempt in range(1, 1_000_000):
            producer = self._producer
            assert producer is not None, "the reporter is started"
            try:
                watchdog.begin()
                producer.begin_transaction()
                for wf, run_id, body_type, body, request_id, trace, _msg in items:
                    self._produce(producer, wf, run_id, body_type, body, request_id, trace)
                # the group metadata before the offsets: a rebalance in between fails the commit
                group = self._consumer.group_metadata
                offsets = self._consumer.commit_offsets({((m.topic(), m.partition()), m.offset()) for *_x, m in items})
                if group is None or attempt > _TRIES_WITH_OFFSETS:
                    # no generation yet, or the offsets keep being refused (a rebalance under
                    # way): the results go now, the offsets with a later batch; results are
                    # never held back for the sake of offsets
                    offsets = []
                if offsets:
                    # bound now: a call given up on must name this try's producer, not the next one's
                    self._guarded(functools.partial(producer.send_offsets_to_transaction, offsets, group, 30))
                producer.commit_transaction(30)
            except TxnCallHung as exc:
                watchdog.end()
                if not self._current(generation):
                    return False
                self.hangs += 1
                log.warning(
                    "activity reporter %s: %s (librdkafka #5511); replacing its producer and committing its "
                    "%d results again",
                    self._txn_id,
                    exc,
                    len(items),
                )
                self._producer = self._make_producer()  # init_transactions fences the stuck producer
                continue
            except KafkaException as exc:
                if not self._current(generation):
                    return False
                self._failed(exc, attempt, producer, generation)
                watchdog.end()
                if not self._current(generation):
                    return False
                if self._stop.is_set() and attempt >= 5:
                    log.error("activity results not committed at shutdown (%s): their tasks run again", exc)
                    return True
                time.sleep(backoff)
                backoff = min(2.0, backoff * 2)
                continue
            except Exception:
                # not Kafka's (a record that does not encode): end the transaction before the
                # error goes up, or every later batch meets "Operation not valid in state InTransaction"
                watchdog.end()
                try:
                    producer.abort_transaction(10)
                except KafkaException as abort_exc:
                    log.warning("activity reporter %s: abort after an error failed: %s", self._txn_id, abort_exc)
                raise
            watchdog.end()
            if not self._current(generation):
                # committed after all, but a new thread commits the batch again: the engine keeps
                # the first result of each attempt and drops the repeat
                return False
            self.transactions += 1
            log.debug(
                "committed %d results, offsets %s",
                len(items),
                [(tp.partition, tp.offset, tp.metadata) for tp in offsets],
            )
            self._committed.update({tp.partition: (tp.offset, tp.metadata) for tp in offsets})
            for *_x, msg in items:
                self._consumer.reported(msg)
            return True
        return True

    def _produce(
        self,
        producer: Producer,
        wf: str,
        run_id: str,
        body_type: str,
        body: dict[str, Any],
        request_id: str,
        trace: tuple[str, str] | None,
    ) -> None:
        trace_id, span_id = trace or (None, None)
        try:
            value = self._codec.encode(
                command(wf, body_type, body, request_id=request_id, run_id=run_id, trace_id=trace_id, span_id=span_id)
            )
        except SchemaError as exc:
            if body.get("eager_workflow_task") is None:
                raise
            # the result without its eager task: the engine schedules an ordinary workflow task
            log.error(
                "workflow %s: an eager workflow task could not be encoded (%s); its result is sent without it", wf, exc
            )
            body = {**body, "eager_workflow_task": None}
            value = self._codec.encode(
                command(wf, body_type, body, request_id=request_id, run_id=run_id, trace_id=trace_id, span_id=span_id)
            )
        try:
            self._send(producer, wf, value)
        except KafkaException as exc:  # e.g. a result over message.max.bytes: fail the activity instead
            log.error("command %s for %s could not be produced: %s", body_type, wf, exc)
            fallback = self._on_unsendable(wf, body_type, body, exc)
            if fallback is not None:
                fb_type, fb_body = fallback
                self._send(
                    producer,
                    wf,
                    self._codec.encode(
                        command(
                            wf,
                            fb_type,
                            fb_body,
                            request_id=request_id,
                            run_id=run_id,
                            trace_id=trace_id,
                            span_id=span_id,
                        )
                    ),
                )

    def _send(self, producer: Producer, wf: str, value: bytes) -> None:
        produce_waiting(producer, self._topics.commands, value, wf.encode())

    def _failed(self, exc: KafkaException, attempt: int, producer: Producer, generation: int) -> None:
        """Abort (or, when the producer cannot go on, replace it); the next try recomputes the
        offsets, so a partition lost meanwhile is left out, with fresh group metadata. Watched
        like the transaction itself: an abort can block too."""
        self.aborts += 1
        self._consumer.refresh_metadata.set()
        err = exc.args[0] if exc.args else None
        log.warning(
            "activity results transaction failed (try %d): %s",
            attempt,
            err.str() if isinstance(err, KafkaError) else exc,
        )
        fatal = not isinstance(err, KafkaError) or err.fatal() or not err.txn_requires_abort()
        if not fatal:
            try:
                producer.abort_transaction(30)
                return
            except KafkaException as again:
                log.warning("abort failed (%s); recreating the producer", again)
        try:
            producer.flush(1)
        except KafkaException:
            pass
        replacement = self._make_producer()
        if self._current(generation):  # not taken over meanwhile (that made its own producer)
            self._producer = replacement


def offsets_for(points: dict[tuple[str, int], tuple[int, list[int]]]) -> list[TopicPartition]:
    """TopicPartitions (of ``points``' (topic, partition) keys) with the commit metadata of
    ``encode_reported``."""
    return [
        TopicPartition(topic, p, pos, metadata=encode_reported(pos, above))
        for (topic, p), (pos, above) in sorted(points.items())
    ]
