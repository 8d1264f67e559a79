"""The timer service (docs/architecture.md, "Timers"): fires the durable timers kept on the delay topics.

Timers are records on ``{ns}.timers.{tier}``, one topic per delay tier (``TIMER_TIERS_MS``: 1 s,
10 s, 1 min, 10 min, 1 h, 1 day), keyed by workflow ID. Whoever schedules a timer produces its
``TimerRecord`` to ``choose_tier(fire_at_ms - now_ms)``; the record's Kafka timestamp is its
enqueue time E. One consumer group, ``{ns}.timers``, reads all six topics:

* The near tier ("1s") is read eagerly. Its records are due within about ten seconds, so they go
  to an in-memory heap ordered by fire time, and the loop sleeps (in ``poll``) until the earliest
  is due and fires it then.
* Every other tier T delays each record by the same D_T, so the head of a partition is always the
  first to mature (at E + D_T). The service holds at most that one record per partition, pauses
  the partition until the head matures, then fires it if it is due or re-produces it unchanged to
  the finer tier ``choose_tier(remaining)``, and resumes. Records that a consume batch delivered
  behind a held head are dropped and the partition is rewound to them (``seek``), so memory is
  bounded by the partition count plus the near window, never by the number of pending timers.

Firing produces a ``FireTimer`` command to ``{ns}.commands`` keyed by the workflow ID. Firing is
at-least-once: per partition, offsets are committed only up to the lowest record whose output
(the command, the re-enqueued copy, or a dead letter) Kafka has not yet acknowledged. The history
processor ignores a timer that is no longer pending, so a repeated firing changes nothing.
Because near-tier timers fire out of offset order, a crash repeats the near window's fired timers
above the commit point; a graceful release (shutdown, rebalance) avoids that by re-enqueueing the
timers still waiting in the heap and committing past everything else.
A record that cannot be decoded goes to ``{ns}.dlq`` and the partition keeps moving.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from prometheus_client import CollectorRegistry

from kadence.topics import serde
from kadence.topics.broker_wait import assign_at_committed, until_broker_answers
from kadence.topics.catalogue import TIMER_TIERS_MS, Catalogue
from kadence.topics.codec_metrics import register_codec_metrics
from kadence.topics.config import PAUSING_FETCH_WAIT_MS
from kadence.topics.errors import BrokerUnavailableError, SchemaError
from kadence.topics.polling import raise_if_refused
from kadence.topics.produce import produce_waiting
from kadence.topics.records import command
from kadence.topics.replacing_producer import ReplacingProducer

from .timer_config import NEAR_TIER, TIERS_ASC, TimerConfig, choose_tier
from .timer_metrics import TimerMetrics
from .timer_records import AcceptedTimer, TierPartition

__all__ = ["TimerService"]

log = logging.getLogger(__name__)

#: a near-tier record due later than this is not held in memory but sent to a coarser tier
#: (records reach the near tier with less than the next tier's delay left: 10 s, plus slack)
_NEAR_GUARD_MS = 2 * TIERS_ASC[1][1]


def _now_ms() -> int:
    return int(time.time() * 1000)


class TimerService:
    """One timer service instance. ``run()`` blocks until ``stop()``."""

    def __init__(
        self,
        config: TimerConfig,
        *,
        registry: CollectorRegistry | None = None,
        producer_factory: Callable[[dict[str, Any]], Producer] = Producer,
    ) -> None:
        """``producer_factory`` makes the Kafka producers (tests give it one that wedges)."""
        self.config = config
        self._producer_factory = producer_factory
        self.kafka = config.kafka
        self.topics = Catalogue(config.kafka)
        self.group = f"{self.kafka.namespace}.timers"
        self.registry = registry or CollectorRegistry()
        self.metrics = TimerMetrics(self.registry, config.kafka.namespace)
        register_codec_metrics(self.registry)
        self._tier_of = {self.topics.timers(t): t for t in TIMER_TIERS_MS}
        self._stop = threading.Event()
        #: set once the group has assigned partitions to this instance
        self.ready = threading.Event()
        self._consumer: Consumer | None = None
        self._producer: ReplacingProducer | None = None
        self._timer_codec = serde.codec("TimerRecord")
        self._cmd_codec = serde.topic_codec("Command", self.topics.commands, self.kafka.schema_registry_url)
        self._parts: dict[tuple[str, int], TierPartition] = {}
        self._near: list[Any] = []  # heap of (fire_at_ms, seq, AcceptedTimer)
        self._heads: list[Any] = []  # heap of (wake_at_ms, seq, AcceptedTimer)
        self._n_heads = 0
        self._seq = itertools.count()
        self._near_paused = False
        self._retry: deque[AcceptedTimer] = deque()
        self._fatal: KafkaException | None = None
        self._in_flight = 0
        self._next_commit = 0.0
        self._next_log = 0.0
        self._logged: tuple[Any, ...] = (0, 0, 0, 0, 0, 0)
        #: plain counters (also in the metrics), for the progress line and for tests
        self.fired = 0
        self.reenqueued = 0
        self.dead_lettered = 0
        #: the most records held in memory at any step, near heap and partition heads
        self.peak_near = 0
        self.peak_heads = 0

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Whether ``run()`` got past waiting for the broker and serves (what readiness reports)."""
        return self._consumer is not None

    def stop(self) -> None:
        self._stop.set()

    def held(self) -> tuple[int, int]:
        """(near-tier timers in the heap, far-tier heads held)."""
        return len(self._near), self._n_heads

    def _make_consumer(self) -> Consumer:
        consumer = Consumer(
            self.kafka.consumer(
                self.group,
                **{
                    # dynamic membership, as the history processor's (decision 0036); the client ID names
                    # the instance in the group's description
                    "client.id": f"{self.group}.{self.config.instance_id}",
                    "session.timeout.ms": self.config.session_timeout_ms,
                    "partition.assignment.strategy": "cooperative-sticky",
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    # partitions are paused while their head waits to mature
                    "fetch.wait.max.ms": min(PAUSING_FETCH_WAIT_MS, self.kafka.fetch_wait_ms),
                    # bound what librdkafka prefetches: a held head makes the rest of a fetch useless
                    "max.partition.fetch.bytes": 256 * 1024,
                    "queued.max.messages.kbytes": 16 * 1024,
                    "on_commit": self._on_commit,
                },
            )
        )
        consumer.subscribe(
            list(self._tier_of), on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        return consumer

    def run(self) -> None:
        # a timer service started while the broker is down (restarted by its supervisor during an
        # outage) waits for it instead of exiting (a `make test` chaos seed: `cannot list topics`)
        until_broker_answers(
            self._check_topics,
            what="checking topics",
            who=f"timer service {self.config.instance_id}",
            stop=self._stop,
            log=log,
        )
        # replaced when it stops delivering while the broker answers (librdkafka #5430: after a
        # broker restart and a 30 s pause, `make soak`'s timer service held 100 FireTimer records
        # undelivered for five minutes, and every workflow waited on them)
        self._producer = ReplacingProducer(
            self.kafka.producer(acks="all"), stall_s=self.config.producer_stall_s, factory=self._producer_factory
        )
        self._consumer = self._make_consumer()
        log.info(
            "timer service %s started (namespace %s, group %s, tiers %s)",
            self.config.instance_id,
            self.kafka.namespace,
            self.group,
            ",".join(TIMER_TIERS_MS),
        )
        try:
            while not self._stop.is_set():
                self._step()
        finally:
            self._shutdown()

    def _check_topics(self) -> None:
        self.topics.require([*self._tier_of, self.topics.commands, self.topics.dlq])

    def _shutdown(self) -> None:
        if self._producer is not None:
            try:
                if self._consumer is not None:
                    self._hand_off([p for p in self._parts.values() if p.near])
                remaining = self._producer.flush(10)
                if remaining:
                    log.warning("%d timer outputs not acknowledged at shutdown; they will be redone", remaining)
            except KafkaException as exc:  # a fatal producer: what is not committed is redone
                log.warning("producer at shutdown: %s", exc)
        if self._consumer is not None:
            try:
                self._commit(sync=True)
            except KafkaException as exc:
                log.warning("final commit failed: %s", exc)
            try:
                self._consumer.close()
            except (KafkaException, RuntimeError) as exc:
                log.warning("consumer close: %s", exc)
        self._update_gauges()
        log.info(
            "timer service %s stopped (fired %d, re-enqueued %d, dead-lettered %d)",
            self.config.instance_id,
            self.fired,
            self.reenqueued,
            self.dead_lettered,
        )

    # -- rebalance -----------------------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if partitions:
            # assigned here at the committed offsets, so librdkafka sends no query of its own (one
            # refused with NOT_COORDINATOR is never retried: librdkafka #5586)
            try:
                assign_at_committed(
                    consumer,
                    partitions,
                    timeout=60,
                    what="the timer tiers",
                    who=f"timer service {self.config.instance_id}",
                    stop=self._stop,
                    log=log,
                )
            except BrokerUnavailableError:  # stopping: the partitions are given up unread
                return
        for tp in partitions:
            tier = self._tier_of.get(tp.topic)
            if tier is not None:
                self._parts[(tp.topic, tp.partition)] = TierPartition(tp.topic, tp.partition, tier)
        if partitions:
            log.info(
                "timer service %s assigned %d partitions (%d in all)",
                self.config.instance_id,
                len(partitions),
                len(self._parts),
            )
            self.ready.set()

    @property
    def _live_consumer(self) -> Consumer:
        """The consumer of a service that runs (``run()`` made it before any record)."""
        assert self._consumer is not None, "the timer service is not running"
        return self._consumer

    @property
    def _live_producer(self) -> ReplacingProducer:
        assert self._producer is not None, "the timer service is not running"
        return self._producer

    def _release(self, consumer: Consumer, partitions: list[TopicPartition], lost: bool) -> None:
        parts = [p for p in (self._parts.pop((tp.topic, tp.partition), None) for tp in partitions) if p]
        if not parts:
            return
        if not lost:
            # let what is in flight be acknowledged, so the next owner repeats as little as possible
            self._hand_off([p for p in parts if p.near])
            self._live_producer.flush(5)
            try:
                self._commit(sync=True, parts=parts)
            except KafkaException as exc:
                log.warning("commit on revoke failed: %s", exc)
        near_gone = False
        resume = []
        for part in parts:
            part.alive = False
            near_gone |= part.near
            if part.head is not None:
                part.head = None
                self._n_heads -= 1
            if part.paused:
                resume.append(part.tp())  # a partition must not stay paused for its next owner
                part.paused = False
        if resume:
            try:
                consumer.resume(resume)
            except KafkaException as exc:
                log.warning("resume on revoke failed: %s", exc)
        self._heads = [e for e in self._heads if e[2].part.alive]
        heapq.heapify(self._heads)
        if near_gone:
            self._near = [e for e in self._near if e[2].part.alive]
            heapq.heapify(self._near)
        log.info(
            "timer service %s %s %d partitions", self.config.instance_id, "lost" if lost else "released", len(parts)
        )

    def _hand_off(self, parts: list[TierPartition]) -> None:
        """Before near-tier partitions are released: re-enqueue their timers that are still waiting
        in the heap, so that the partitions' offsets can be committed past the timers that already
        fired. Otherwise the next owner would read (and fire) all of those again."""
        if not parts or not self._near:
            return
        leaving = set(parts)
        keep, moved = [], 0
        now = _now_ms()
        for entry in self._near:
            rec = entry[2]
            if rec.part in leaving:
                self._reenqueue(rec, NEAR_TIER, now)
                moved += 1
            else:
                keep.append(entry)
        heapq.heapify(keep)
        self._near = keep
        if moved:
            log.info(
                "handed off %d waiting near-tier timers (re-enqueued) before releasing %d partitions", moved, len(parts)
            )

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._release(consumer, partitions, lost=False)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._release(consumer, partitions, lost=True)

    # -- the loop ------------------------------------------------------------------------------

    def _step(self) -> None:
        now = _now_ms()
        if self._near and self._near[0][0] <= now:
            self._fire_due(now)
        if self._heads and self._heads[0][0] <= now:
            self._mature_heads(now)
        if self._near_paused:
            self._check_near_capacity()
        if self._retry:
            self._redo()
        self._live_producer.poll(0)
        self._live_producer.watch()
        if self._fatal is not None:
            raise self._fatal
        mono = time.monotonic()
        if mono >= self._next_commit:
            self._next_commit = mono + self.config.commit_interval_ms / 1000
            self._commit()
            self._update_gauges()
            self.metrics.lag.sample(self._live_consumer)
            if mono >= self._next_log:
                self._next_log = mono + self.config.log_interval_s
                self._log_progress()
        msg = self._live_consumer.poll(self._wait_seconds(_now_ms()))
        if msg is None:
            return
        msgs = [msg]
        if self.config.max_batch > 1:
            msgs.extend(self._live_consumer.consume(num_messages=self.config.max_batch - 1, timeout=0))
        self._handle(msgs)

    def _wait_seconds(self, now: int) -> float:
        wake = now + 100
        if self._near:
            wake = min(wake, self._near[0][0])
        if self._heads:
            wake = min(wake, self._heads[0][0])
        if self._retry:
            wake = now
        return max(0.0, (wake - now) / 1000)

    def _handle(self, msgs: list[Any]) -> None:
        now = _now_ms()
        rewound: list[TierPartition] = []
        for i, msg in enumerate(msgs):
            if i & 63 == 63:  # a big batch must not hold back timers falling due meanwhile
                now = _now_ms()
                if self._near and self._near[0][0] <= now:
                    self._fire_due(now)
            err = msg.error()
            if err is not None:
                # a fatal consumer error (e.g. this static member fenced after a rejoin) reaches
                # us as a _FATAL message whose fatal() is False; the consumer is dead either way
                if err.fatal() or err.code() == KafkaError._FATAL:
                    raise KafkaException(err)
                if err.code() != KafkaError._PARTITION_EOF:
                    raise_if_refused(err, session_timeout_ms=self.config.session_timeout_ms)
                    log.warning("consumer error: %s", err.str())
                continue
            part = self._parts.get((msg.topic(), msg.partition()))
            if part is None:
                continue
            offset = msg.offset()
            if part.next_offset is not None and offset < part.next_offset:
                continue  # already accepted (a rewind never goes below the accepted prefix)
            if part.paused:
                # delivered in the same batch as the head we hold: fetch it again after the head
                if part.rewind_to is None:
                    rewound.append(part)
                    part.rewind_to = offset
                elif offset < part.rewind_to:
                    part.rewind_to = offset
                continue
            rec = AcceptedTimer(part, offset, msg.key(), msg.value())
            part.pending.append(rec)
            part.next_offset = offset + 1
            try:
                rec.timer = self._timer_codec.decode(rec.value)
            except SchemaError as exc:
                self._dead_letter(rec, "undecodable timer record", exc, now)
                continue
            if part.near:
                self._accept_near(rec, now)
            else:
                ts_type, ts = msg.timestamp()
                enqueued = ts if ts_type != TIMESTAMP_NOT_AVAILABLE and ts > 0 else now
                self._accept_far(rec, min(enqueued, now), now)
        for part in rewound:
            if part.alive and part.rewind_to is not None:
                try:
                    self._live_consumer.seek(part.tp(part.rewind_to))
                except KafkaException as exc:
                    log.warning("seek %s[%d] to %d failed: %s", part.topic, part.partition, part.rewind_to, exc)
            part.rewind_to = None
        n_near = len(self._near)
        if n_near > self.peak_near:
            self.peak_near = n_near
        if self._n_heads > self.peak_heads:
            self.peak_heads = self._n_heads

    def _accept_near(self, rec: AcceptedTimer, now: int) -> None:
        fire_at = rec.timer["fire_at_ms"]
        remaining = fire_at - now
        if remaining <= 0:
            self._fire(rec, now)
        elif remaining > _NEAR_GUARD_MS:
            self._reenqueue(rec, choose_tier(remaining), now)
        else:
            heapq.heappush(self._near, (fire_at, next(self._seq), rec))
            if len(self._near) >= self.config.near_capacity and not self._near_paused:
                self._near_paused = True
                log.warning(
                    "near window holds %d timers; pausing the %s tier until it drains", len(self._near), NEAR_TIER
                )
                self._check_near_capacity()

    def _accept_far(self, rec: AcceptedTimer, enqueued: int, now: int) -> None:
        # matures at E + D_T; a record due sooner than that (put on too coarse a tier) wakes when due
        wake = min(enqueued + rec.part.delay_ms, rec.timer["fire_at_ms"])
        if wake <= now:
            self._mature(rec, now)
            return
        part = rec.part
        part.head = rec
        self._n_heads += 1
        heapq.heappush(self._heads, (wake, next(self._seq), rec))
        self._pause(part)

    def _fire_due(self, now: int) -> None:
        near = self._near
        while near and near[0][0] <= now:
            rec = heapq.heappop(near)[2]
            if rec.part.alive:
                self._fire(rec, now)

    def _mature_heads(self, now: int) -> None:
        heads = self._heads
        while heads and heads[0][0] <= now:
            rec = heapq.heappop(heads)[2]
            part = rec.part
            if not part.alive or part.head is not rec:
                continue
            part.head = None
            self._n_heads -= 1
            self._mature(rec, now)
            self._resume(part)

    def _mature(self, rec: AcceptedTimer, now: int) -> None:
        remaining = rec.timer["fire_at_ms"] - now
        if remaining <= 0:
            self._fire(rec, now)
        else:
            self._reenqueue(rec, choose_tier(remaining), now)

    def _check_near_capacity(self) -> None:
        near_parts = [p for p in self._parts.values() if p.near]
        if len(self._near) >= self.config.near_capacity // 2:
            for part in near_parts:
                if not part.paused:
                    self._pause(part)
        else:
            self._near_paused = False
            for part in near_parts:
                if part.paused:
                    self._resume(part)
            log.info("near window down to %d timers; %s tier resumed", len(self._near), NEAR_TIER)

    def _pause(self, part: TierPartition) -> None:
        self._live_consumer.pause([part.tp()])
        part.paused = True

    def _resume(self, part: TierPartition) -> None:
        self._live_consumer.resume([part.tp()])
        part.paused = False

    # -- outputs -------------------------------------------------------------------------------

    def _fire(self, rec: AcceptedTimer, now: int) -> None:
        t = rec.timer
        body = {
            "timer_id": t["timer_id"],
            "fire_at_ms": t["fire_at_ms"],
            "kind": t["kind"],
            "scheduled_seq": t["scheduled_seq"],
            "attempt": t["attempt"],
        }
        cmd = command(t["workflow_id"], "FireTimer", body, run_id=t["run_id"])
        rec.value = None
        self._send(rec, self.topics.commands, self._cmd_codec.encode(cmd), t["workflow_id"].encode(), now)
        self.fired += 1
        self.metrics.fired.inc()
        self.metrics.lateness.observe((now - t["fire_at_ms"]) / 1000)

    def _reenqueue(self, rec: AcceptedTimer, tier: str, now: int) -> None:
        value, rec.value = rec.value, None
        self._send(rec, self.topics.timers(tier), value, rec.key, now)
        self.reenqueued += 1
        self.metrics.reenqueued.inc()

    def _dead_letter(self, rec: AcceptedTimer, reason: str, exc: Exception, now: int) -> None:
        part = rec.part
        record = {
            "origin_topic": part.topic,
            "origin_partition": part.partition,
            "origin_offset": rec.offset,
            "key": rec.key,
            "value": rec.value,
            "reason": f"{reason}: {exc}"[:2000],
            "error_type": type(exc).__name__,
            "component": "timer-service",
            "timestamp_ms": now,
        }
        rec.value = None
        self._send(rec, self.topics.dlq, serde.encode("DeadLetter", record), rec.key, now)
        self.dead_lettered += 1
        self.metrics.dead.inc()
        log.warning("dead-lettered %s[%d]@%d: %s", part.topic, part.partition, rec.offset, reason)

    def _send(self, rec: AcceptedTimer, topic: str, value: bytes | None, key: bytes | None, timestamp: int) -> None:
        rec.out = (topic, value, key)
        on_delivery = lambda err, _msg, rec=rec: self._delivered(rec, err)  # noqa: E731
        produce_waiting(
            self._live_producer, topic, value, key, timestamp=timestamp, on_delivery=on_delivery, wait_s=0.01
        )
        self._in_flight += 1

    def _delivered(self, rec: AcceptedTimer, err: KafkaError | None) -> None:
        self._in_flight -= 1
        if err is not None:
            if err.fatal():
                self._fatal = KafkaException(err)
                return
            log.warning("producing to %s failed (%s); retrying", rec.out[0] if rec.out else "?", err.str())
            self._retry.append(rec)
            return
        rec.done = True
        rec.out = None
        part = rec.part
        if not part.alive:
            return
        pending = part.pending
        if pending and pending[0].done:
            while pending and pending[0].done:
                pending.popleft()
            part.dirty = True

    def _redo(self) -> None:
        retry, self._retry = self._retry, deque()
        now = _now_ms()
        for rec in retry:
            if rec.part.alive and rec.out is not None:
                self.metrics.retries.inc()
                self._send(rec, *rec.out, now)

    # -- commits and reporting -----------------------------------------------------------------

    def _commit(self, sync: bool = False, parts: list[TierPartition] | None = None) -> None:
        offsets = []
        for part in self._parts.values() if parts is None else parts:
            if not part.dirty:
                continue
            part.dirty = False
            point = part.commit_point()
            if point is None or point == part.committed:
                continue
            part.committed = point
            offsets.append(part.tp(point))
        if offsets and sync:
            self._live_consumer.commit(offsets=offsets, asynchronous=False)
        elif offsets:
            self._live_consumer.commit(offsets=offsets, asynchronous=True)

    def _on_commit(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        failed = [tp for tp in partitions if tp.error is not None] if err is None else partitions
        if not failed:
            return
        log.warning("offset commit failed: %s", err.str() if err is not None else failed[0].error)
        for tp in failed:
            part = self._parts.get((tp.topic, tp.partition))
            if part is not None:
                part.committed = None
                part.dirty = True  # committed again at the next interval

    def _update_gauges(self) -> None:
        self.metrics.held_near.set(len(self._near))
        self.metrics.held_heads.set(self._n_heads)
        self.metrics.in_flight.set(self._in_flight)

    def _log_progress(self) -> None:
        state = (self.fired, self.reenqueued, self.dead_lettered, len(self._near), self._n_heads, self._in_flight)
        if state == self._logged:
            return
        self._logged = state
        log.info(
            "timers: fired %d, re-enqueued %d, dead-lettered %d; holding %d near + %d heads "
            "(peak %d + %d); %d in flight",
            self.fired,
            self.reenqueued,
            self.dead_lettered,
            len(self._near),
            self._n_heads,
            self.peak_near,
            self.peak_heads,
            self._in_flight,
        )
