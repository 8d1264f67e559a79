"""A worker's task consumer: one thread polls a task topic, hands each task to the worker's loop
within its slots (a local backlog beyond them), and commits offsets only up to the lowest task
still running (``OffsetTracker``), so a slow task never lets a later offset be committed past it."""

from __future__ import annotations

import asyncio
import collections
import logging
import queue
import threading
from collections.abc import Callable, Collection, Hashable, Iterable
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from kadence.topics.broker_wait import assign_at_committed
from kadence.topics.errors import BrokerUnavailableError
from kadence.topics.polling import consumed_at, poll_ready, raise_if_refused, resume_awake

from ._local_backlog import LocalBacklog
from ._rate_limit import QueueRateLimiter
from ._reporter import decode_reported, offsets_for
from ._slots import Slots

if TYPE_CHECKING:
    from ._worker import Worker

__all__ = ["READ_AHEAD_BYTES", "OffsetTracker", "TaskConsumer"]

#: a lane's read-ahead stops fetching at this many bytes of records too, whatever their count
#: (tasks with large inputs)
READ_AHEAD_BYTES = 16 * 1024 * 1024


def _at(msg: Message) -> tuple[tuple[str, int], int]:
    """((topic, partition), offset) of a consumed record: where the tracker keeps it."""
    partition, offset = consumed_at(msg)
    return (msg.topic() or "", partition), offset


#: the worker's logger: its consumers' lines read as the worker's, as before they had a module
log = logging.getLogger("kadence._worker")


class _Offsets:
    """One partition's offsets in flight: ``order`` in arrival order (finished ones dropped from
    its left as the lowest moves), ``open`` the ones not finished, ``done`` the finished ones
    above the lowest open one. Every step is O(1) amortized: a worker reads thousands of tasks
    ahead (priority and fairness pick among them) and finishes them out of order."""

    __slots__ = ("done", "done_max", "open", "order")

    def __init__(self) -> None:
        self.order: collections.deque[int] = collections.deque()
        self.open: set[int] = set()
        self.done: set[int] = set()
        self.done_max = -1

    def low(self, also_finished: Collection[int] = ()) -> int | None:
        """The lowest open offset (not in ``also_finished``), or None."""
        for o in self.order:
            if o in self.open and o not in also_finished:
                return o
        return None


class OffsetTracker:
    """Per partition (any hashable: the task consumer's are ``(topic, partition)``, a consumer
    reading several priority lanes): the offset that is safe to commit = the lowest offset still
    in flight."""

    def __init__(self) -> None:
        self._parts: dict[Hashable, _Offsets] = {}
        self._lock = threading.Lock()

    def started(self, partition: Hashable, offset: int) -> None:
        with self._lock:
            part = self._parts.get(partition)
            if part is None:
                part = self._parts[partition] = _Offsets()
            part.order.append(offset)  # offsets arrive in order per partition
            part.open.add(offset)

    def finished(self, partition: Hashable, offset: int) -> int | None:
        with self._lock:
            part = self._parts.get(partition)
            if part is None or offset not in part.open:
                return None  # partition revoked meanwhile
            part.open.remove(offset)
            part.done_max = max(part.done_max, offset)
            part.done.add(offset)
            order = part.order
            while order and order[0] not in part.open:  # the lowest moved past finished ones
                part.done.discard(order.popleft())
            if order:
                return order[0]
            part.done.clear()
            return part.done_max + 1

    def commit_points(self, finishing: set[tuple[Hashable, int]]) -> dict[Hashable, tuple[int, list[int]]]:
        """Per partition held: (the offset safe to commit, the finished offsets above it), as if
        the (partition, offset) pairs of ``finishing`` had finished too."""
        out = {}
        extras: dict[Hashable, set[int]] = collections.defaultdict(set)
        for q, o in finishing:
            extras[q].add(o)
        with self._lock:
            for p, part in self._parts.items():
                extra = extras.get(p, set())
                low = part.low(extra)
                if low is not None:
                    out[p] = (low, sorted(o for o in part.done | extra if o > low))
                else:
                    top = max(part.done_max, max(extra, default=-1))
                    if top >= 0:
                        out[p] = (top + 1, [])
        return out

    def revoke(self, partitions: Iterable[Hashable]) -> None:
        with self._lock:
            for p in partitions:
                self._parts.pop(p, None)

    def count(self) -> int:
        with self._lock:
            return sum(len(part.open) for part in self._parts.values())


class TaskConsumer:
    """A consumer thread that hands records to the asyncio loop, with back-pressure."""

    #: how often stored offsets are committed while tasks are in hand (an idle consumer commits at once)
    AUTO_COMMIT_MS = 1000
    #: tasks handed to the worker's loop whose handler has not run yet (``_may_hand``); once at
    #: the limit, the consumer is woken when half of them have begun (a wake-up per task cost
    #: the worker 5 % of a core and ten-step throughput 10 %: ``make bench``, session 60)
    MAX_HANDED = 64

    def __init__(
        self,
        worker: Worker,
        topic: str,
        group: str,
        handler: Callable[[Message], None],
        max_inflight: int,
        *,
        transactional: bool = False,
        slots: Slots | None = None,
        limiter: QueueRateLimiter | None = None,
        lanes: dict[str, float] | None = None,
        read_ahead: int | None = None,
    ) -> None:
        #: the queue's topic (its default lane); ``lanes``: every topic read (topic -> weight,
        #: first lane first), the priority lanes of an activity-task consumer (decision 0060)
        self.topic = topic
        self.topics = list(lanes or {topic: 1.0})
        self.tracker = OffsetTracker()
        self._worker = worker
        self._handler = handler
        #: a task is handed to the loop only in a slot it takes here (shared with the worker's
        #: eager activities for the activity consumer); given back when it is done
        self._slots = slots or Slots(max_inflight)
        #: paces the tasks handed to the loop to this worker's share of the queue's rate limits
        #: (activity tasks only); consumer thread only
        self._limiter = limiter
        #: the (topic, partition)s this consumer holds (the limiter's share); consumer thread only
        self._owned: set[tuple[str, int]] = set()
        self._loop = asyncio.get_running_loop()
        #: offsets are committed by an ``ActivityReporter``'s transactions, not by auto-commit
        self.transactional = transactional
        #: per (topic, partition): tasks that reported before it came here (commit metadata)
        self._reported: dict[tuple[str, int], set[int]] = {}
        #: the consumer's group metadata (generation), for the reporter (``_run`` refreshes it
        #: when ``refresh_metadata`` is set: at start, on every rebalance, after a refused commit)
        self.group_metadata = None
        self.refresh_metadata = threading.Event()
        self.refresh_metadata.set()
        conf = worker.client.config.waiting_consumer(
            group,
            **{
                "enable.auto.commit": not transactional,
                "auto.commit.interval.ms": self.AUTO_COMMIT_MS,
                "enable.auto.offset.store": False,
                "session.timeout.ms": worker.session_timeout_ms,
                "partition.assignment.strategy": "cooperative-sticky",
            },
        )
        self.consumer = Consumer(conf)
        self._stop = threading.Event()
        #: the lanes whose partitions are paused (their part of the backlog is full)
        self._paused_topics: set[str] = set()
        #: set by ``stop_taking``: polled records are held, not dispatched
        self._holding = False
        #: records taken from Kafka but not handed to the loop yet (all slots busy), in the order
        #: they are dispatched (priority lane, fairness key); consumer thread only
        self._backlog = LocalBacklog(lanes or {topic: 1.0})
        #: records read ahead per lane before its partitions pause
        self._backlog_max = max(read_ahead or 100, 2 * max_inflight)
        #: records handed to the loop whose ``done`` has not been processed yet; consumer thread only
        self._dispatched = 0
        #: records handed to the loop (consumer thread) and whose handler has begun (loop thread):
        #: each counter has one writer, so their difference needs no lock
        self._handed = 0
        self._begun = 0
        #: the consumer thread waits for a handler to begin (set by it, cleared by the loop)
        self._hand_blocked = False
        #: offsets stored since the last idle commit; consumer thread only
        self._uncommitted = False
        # offsets to store, handed from any thread to the consumer thread: only that thread
        # calls into the consumer (librdkafka handles are not used across threads here)
        self._completed: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._wakeup = self._slots.freed
        self._thread = threading.Thread(target=self._run, name=f"kadence-{topic}", daemon=True)
        self._lag = worker.metrics.lag_sampler()

    @property
    def _paused(self) -> bool:
        """Whether some lane's partitions are paused."""
        return bool(self._paused_topics)

    def start(self) -> None:
        self.consumer.subscribe(
            self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_revoke
        )
        self._thread.start()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.refresh_metadata.set()  # a new generation
        if not partitions:
            return
        self._owned |= {(tp.topic, tp.partition) for tp in partitions}
        if self._limiter is not None:
            self._limiter.set_partitions(self._owned)
        # librdkafka keeps a partition's pause across a rebalance: one paused with a full backlog,
        # taken away, and given back after the backlog drained (and ``_set_paused`` resumed what
        # was held then) stayed paused for good, a worker that polled and got nothing
        # (tests/integration/test_worker_pause_rebalance.py). Given partitions take the consumer's
        # present state; before librdkafka assigns them (after this callback) nothing is queued
        # for them, so this drops no fetched record.
        paused = [tp for tp in partitions if tp.topic in self._paused_topics]
        running = [tp for tp in partitions if tp.topic not in self._paused_topics]
        if paused:
            consumer.pause(paused)
        if running:
            consumer.resume(running)
        # The committed offsets are read here and the partitions assigned at them, so librdkafka
        # sends no query of its own: one refused with NOT_COORDINATOR is never retried
        # (librdkafka #5586), and the partitions stayed unfetched for good (`make soak`'s worker
        # that ran no activity after the broker pause). Under transactions the read waits for a
        # previous owner's open transaction (require_stable) and names the tasks that reported
        # above the committed offset: they are not run again. While the broker restarts the read
        # fails (NOT_COORDINATOR): retried, since an error raised here comes out of poll() and
        # ended the consumer thread (chaos seed 3284925459)
        try:
            offsets = assign_at_committed(
                consumer,
                partitions,
                timeout=60,
                what=self.topic,
                who=f"worker {self._worker.identity}",
                stop=self._stop,
                log=log,
            )
        except BrokerUnavailableError:  # stopping: the partitions are given up unread
            return
        if not self.transactional:
            return
        for tp in offsets:
            reported = self._reported[(tp.topic, tp.partition)] = decode_reported(tp.offset, tp.metadata)
            if reported:
                log.info(
                    "%s[%d]: %d tasks above committed offset %d have reported; they will not run again",
                    tp.topic,
                    tp.partition,
                    len(reported),
                    tp.offset,
                )

    def commit_offsets(self, finishing: set[tuple[tuple[str, int], int]]) -> list[TopicPartition]:
        """The offsets (with reported tasks in their metadata) a transaction commits (any thread);
        ``finishing``: ((topic, partition), offset) of the tasks it reports."""
        return offsets_for(self.tracker.commit_points(finishing))  # type: ignore[arg-type]

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.refresh_metadata.set()
        gone = {(tp.topic, tp.partition) for tp in partitions}
        for tp in gone:
            self._reported.pop(tp, None)
        self.tracker.revoke(gone)
        self._owned -= gone
        if self._limiter is not None:
            self._limiter.set_partitions(self._owned)
            self._limiter.forget(gone)
        # not started yet: the partition's next owner gets them (from the committed offset)
        self._backlog.drop(gone)

    def _run(self) -> None:
        # Back-pressure without pause/resume at every slot: librdkafka drops the records it had
        # prefetched for a partition when it is paused and fetches them again on resume, so
        # toggling at the limit made every freed slot wait for a fetch round trip (measured with
        # the default 100 slots: 3-activity throughput 207 workflows/s at 128 in flight, 118 at
        # 256, 75 at 512; with the backlog 181 / 235 / 192). Records beyond the limit wait in a
        # local backlog (already tracked, so no offset is committed past them); the partitions
        # are paused only when the backlog itself is long.
        backlog = self._backlog
        try:
            while not self._stop.is_set():
                if self.transactional and self.refresh_metadata.is_set() and self.consumer.assignment():
                    # for the reporter's transactions: taken on the thread that polls (the call
                    # blocked when made from another), once the group has given us partitions,
                    # and again after every rebalance or refused transaction
                    self.refresh_metadata.clear()
                    self.group_metadata = self.consumer.consumer_group_metadata()
                self._store_completed()
                self._lag.sample(self.consumer)
                if backlog:
                    # what has arrived meanwhile joins the backlog before the next task is
                    # chosen: a task of a higher lane, or of a key with less served, that came
                    # while the slots were full goes first (one record a turn took the slot's
                    # turn after it; measured: a small tenant's p99 wait doubled)
                    for msg in self.consumer.consume(num_messages=self._backlog_max, timeout=0):
                        self._take(msg)
                throttled = self._dispatch_backlog()
                self._pause_full_lanes()
                if backlog:
                    # full: wake as soon as a task finishes (not after a fixed poll timeout), or
                    # when the rate limit's next token is there
                    self._wakeup.wait(min(0.1, self._limiter.wait_s()) if throttled and self._limiter else 0.1)
                    self._wakeup.clear()
                    continue
                for msg in poll_ready(self.consumer, 100, 0.1):
                    self._take(msg)
        except BaseException as exc:
            log.critical("task consumer %s crashed; the worker stops", self.topic, exc_info=True)
            try:
                self._loop.call_soon_threadsafe(self._worker._consumer_died, self.topic, exc)
            except RuntimeError:  # the loop is closed: the worker has already stopped
                pass
        finally:
            self._store_completed()
            try:
                self.consumer.close()
            except (KafkaException, RuntimeError):
                pass

    def _dispatch_backlog(self) -> bool:
        """Hand waiting records to the loop while slots (and the rate limit) allow; True when
        the rate limit held one back."""
        backlog = self._backlog
        limiter = self._limiter
        if limiter is not None:
            limiter.refresh()
        while backlog and not self._holding and self._may_hand() and self._slots.take():
            if limiter is None or not limiter.active:
                msg = backlog.pop()
                assert msg is not None  # the backlog is not empty
                self._dispatch(msg)
                continue
            candidates = backlog.ordered(most=1000)  # a rate limit scans the first thousand
            i = limiter.pick(candidates)
            if i is None:
                self._slots.give_back(wake=False)  # nobody waits for it: this thread took it
                return True
            backlog.take(candidates[i])
            self._dispatch(candidates[i])
        return False

    def _pause_full_lanes(self) -> None:
        """Pause the partitions of each lane whose part of the backlog is full, resume the others:
        a lane of many waiting tasks stops fetching, the other lanes go on (a task of level 1 is
        read while level 5's backlog waits in Kafka)."""
        for topic in self._backlog.topics:
            full = (
                self._backlog.lane_count(topic) >= self._backlog_max
                or self._backlog.lane_bytes(topic) >= READ_AHEAD_BYTES
            )
            if full != (topic in self._paused_topics):
                self._set_paused(topic, full)

    def _set_paused(self, topic: str, pause: bool) -> None:
        assignment = [tp for tp in self.consumer.assignment() if tp.topic == topic]
        if pause:
            self.consumer.pause(assignment)
            self._paused_topics.add(topic)
            self._worker.stats["backlog_pauses"] += 1
        else:
            if assignment:
                resume_awake(self.consumer, self.consumer.position(assignment))
            self._paused_topics.discard(topic)

    def _take(self, msg: Message) -> None:
        err = msg.error()
        if err:
            if err.fatal():
                log.error("task consumer %s: %s", self.topic, err.str())
            # ends this thread, and so the worker (WorkerCrashedError naming the setting)
            raise_if_refused(err, session_timeout_ms=self._worker.session_timeout_ms)
            return
        tp, offset = _at(msg)
        self.tracker.started(tp, offset)
        reported = self._reported.get(tp)
        if reported and offset in reported:  # its result is committed: do not run it again
            reported.discard(offset)
            self.tracker.finished(tp, offset)
            self._worker.stats["reported_tasks_skipped"] += 1
            return
        if (
            not self._backlog
            and not self._holding
            and (self._limiter is None or not self._limiter.active)
            and self._may_hand()
            and self._slots.take()
        ):
            self._dispatch(msg)
        else:
            self._backlog.add(msg)  # the next turn's ``_dispatch_backlog`` starts it (ordered, paced)

    def _may_hand(self) -> bool:
        """Whether another task may be handed to the loop: at most ``MAX_HANDED`` wait there for
        their handler, so the order the backlog chose is the order they run in (the loop's queue
        is first come, first served: with a thousand workflow tasks handed at once, a level-1
        one read after them ran after them; measured, 5.7 s behind 2,000 tasks of 5 ms)."""
        if self._handed - self._begun < self.MAX_HANDED:
            return True
        self._hand_blocked = True
        # again, now that the loop will wake this thread: the hand-over may have emptied between
        # the count and the flag (then no handler is left to wake it)
        if self._handed - self._begun < self.MAX_HANDED:
            self._hand_blocked = False
            return True
        return False

    def _dispatch(self, msg: Message) -> None:
        self._dispatched += 1
        self._handed += 1
        self._loop.call_soon_threadsafe(self._run_handler, msg)

    def _run_handler(self, msg: Message) -> None:
        """On the loop: the task leaves the hand-over (the consumer may hand more once half of
        the hand-over has begun), and runs."""
        self._begun += 1
        if self._hand_blocked and self._handed - self._begun <= self.MAX_HANDED // 2:
            self._hand_blocked = False
            self._wakeup.set()
        self._handler(msg)

    def done(self, msg: Message) -> None:
        """The record's work is durable (its command was acknowledged): advance the offset.

        Callable from any thread."""
        self._completed.put(_at(msg))
        self._wakeup.set()

    def reported(self, msg: Message) -> None:
        """``done`` for a task whose result and offset a transaction has just committed: the
        tracker learns it at once (the reporter's next commit must count it), not at the consumer
        thread's next turn. Callable from any thread."""
        self.tracker.finished(*_at(msg))
        self.done(msg)

    def _store_completed(self) -> None:
        latest: dict[tuple[str, int], int] = {}
        while True:
            try:
                tp, offset = self._completed.get_nowait()
            except queue.Empty:
                break
            self._dispatched -= 1
            self._slots.give_back()
            commit = self.tracker.finished(tp, offset)
            if commit is not None:
                latest[tp] = commit
        if latest and not self.transactional:
            try:
                self.consumer.store_offsets(offsets=[TopicPartition(t, p, o) for (t, p), o in latest.items()])
            except (KafkaException, RuntimeError) as exc:  # revoked meanwhile: redelivered elsewhere
                log.debug("store_offsets %s: %s", self.topic, exc)
            else:
                self._uncommitted = True
        if self._uncommitted and self._dispatched == 0 and not self._backlog:
            # Idle: commit what is stored now, not at the next auto-commit (up to a second
            # later). The committed offset is what a backlog probe counts from (``kadence
            # builds list``, the backlog gauge): tasks finished in the last second counted as
            # waiting there. Under load auto-commit does the work, once a second.
            self._uncommitted = False
            try:
                self.consumer.commit(asynchronous=True)
            except KafkaException as exc:  # nothing stored after all, or revoked: auto-commit's turn
                log.debug("commit %s: %s", self.topic, exc)

    def stop_taking(self) -> None:
        """Start no more tasks (the worker is shutting down): records polled from now on wait in
        the backlog, so no offset is committed past them and another worker runs them."""
        self._holding = True

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
