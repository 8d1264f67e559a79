"""Archival: closed runs leave Kafka for an archive store after their retention.

The archiver consumes ``{ns}.history`` (read_committed, at least once, consumer group
``{ns}.archiver``) and keeps, in Redis, the raw Kafka value of every event of every run it has
not archived yet, and the close time of every closed run. A periodic sweep takes the runs whose
close time is older than the namespace's retention and, per run:

1. writes the run as an Avro container file to the archive store (temporary name, fsync, rename;
   an S3 PUT is atomic), reads it back and verifies it: names, count, seq 1..n, byte-equal
   values. An existing archive that verifies is reused;
2. only then produces a tombstone for every history key ``{workflow_id}/{run_id}/{seq}`` to the
   run's partition, and a ``PurgeClosedRun`` command that lets the history processor drop the
   workflow's state if that run is still its current, closed run;
3. once Kafka acknowledged both, forgets the run in Redis.

Every step is idempotent, so a crash anywhere is repaired by the next sweep: until step 2 the
history is in Kafka; from step 2 on a verified archive exists. Never neither.

Redis keys (prefix ``kadence:{ns}:archiver:``): ``run:{workflow_id}/{run_id}`` a hash of
``p`` (partition), ``{seq}`` (value) and ``o{seq}`` (offset); ``closed`` a sorted set of runs by
close time; ``held`` runs that cannot be archived (incomplete history, mismatching archive);
``stats`` counters.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import redis
from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition
from prometheus_client import CollectorRegistry, Counter, Histogram

from kadence.storage import open_store
from kadence.topics import serde
from kadence.topics.archive import (
    ArchiveStore,
    archive_key,
    decode_archive,
    encode_archive,
    verify_archive,
)
from kadence.topics.batch_producer import BatchProducer
from kadence.topics.broker_wait import assign_at_committed
from kadence.topics.catalogue import Catalogue
from kadence.topics.consumer_lag import LagSampler, lag_gauge
from kadence.topics.errors import ArchiveError, BrokerUnavailableError, KadenceError, SchemaError
from kadence.topics.polling import poll_ready
from kadence.topics.records import CLOSE_EVENTS, command, history_key, now_ms

from .archiver_config import DEFAULT_RETENTION_S, ArchiverConfig, parse_duration, retention_from_file
from .offsets import commit_positions

__all__ = [
    "CLOSE_EVENTS",
    "DEFAULT_RETENTION_S",
    "Archiver",
    "ArchiverConfig",
    "SweepReport",
    "parse_duration",
    "retention_from_file",
]

log = logging.getLogger(__name__)


@dataclass
class SweepReport:
    archived: int = 0
    reused: int = 0
    held: int = 0
    failed: int = 0


class _Keys:
    def __init__(self, namespace: str) -> None:
        self.prefix = f"kadence:{namespace}:archiver:"
        self.closed = self.prefix + "closed"
        self.held = self.prefix + "held"
        self.stats = self.prefix + "stats"

    def run(self, member: str) -> str:
        return self.prefix + "run:" + member


def _split(member: str) -> tuple[str, str]:
    wf, run_id = member.rsplit("/", 1)
    return wf, run_id


#: what a sweep does with a due run (``SweepReport``'s counts, the outcome label of the runs metric)
SWEEP_OUTCOMES = ("archived", "reused", "held", "failed")


class _Metrics:
    """The archiver's families; every one carries ``namespace``."""

    def __init__(self, registry: CollectorRegistry, namespace: str) -> None:
        r = registry
        self.events = Counter(
            "kadence_archiver_events", "history records taken note of", ["namespace"], registry=r
        ).labels(namespace)
        runs = Counter("kadence_archiver_runs", "runs leaving Kafka, by outcome", ["namespace", "outcome"], registry=r)
        self.runs = {outcome: runs.labels(namespace, outcome) for outcome in SWEEP_OUTCOMES}
        self.sweep = Histogram(
            "kadence_archiver_sweep_seconds",
            "time of one sweep",
            ["namespace"],
            registry=r,
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60, 300),
        ).labels(namespace)
        self.lag = LagSampler(lag_gauge(r), namespace, "archiver")


class Archiver:
    """One archiver instance for a namespace. ``run()`` blocks until ``stop()``."""

    def __init__(
        self,
        config: ArchiverConfig,
        *,
        store: ArchiveStore | None = None,
        redis_client: redis.Redis | None = None,
        registry: CollectorRegistry | None = None,
        producer_factory: Callable[[dict[str, Any]], Producer] = Producer,
    ) -> None:
        self.config = config
        self.kafka = config.kafka
        self.topics = Catalogue(config.kafka)
        self.store = store or open_store(config.store)
        self.redis = redis_client or redis.Redis.from_url(config.redis_url)
        self.keys = _Keys(config.kafka.namespace)
        self._stop = threading.Event()
        self._producer = BatchProducer(
            self.kafka.producer(**{"linger.ms": 5}), who=f"archiver {config.kafka.namespace}", factory=producer_factory
        )
        self._codec = serde.topic_codec("HistoryEvent", self.topics.history, self.kafka.schema_registry_url)
        self._cmd_codec = serde.topic_codec("Command", self.topics.commands, self.kafka.schema_registry_url)
        self.metrics = _Metrics(registry or CollectorRegistry(), config.kafka.namespace)

    def stop(self) -> None:
        self._stop.set()

    # -- the loop ----------------------------------------------------------------------------------

    def run(self) -> None:
        consumer = Consumer(
            self.kafka.consumer(
                f"{self.kafka.namespace}.archiver",
                **{"session.timeout.ms": 6000, "partition.assignment.strategy": "cooperative-sticky"},
            )
        )
        consumer.subscribe([self.topics.history], on_assign=self._on_assign)
        log.info(
            "archiver for namespace %s started (retention %.0fs, store %s)",
            self.kafka.namespace,
            self.config.retention_s,
            type(self.store).__name__,
        )
        next_sweep = time.monotonic()
        try:
            while not self._stop.is_set():
                msgs = [m for m in poll_ready(consumer, 2000, 0.2) if m.error() is None]
                self.metrics.lag.sample(consumer)
                if msgs:
                    self.ingest(msgs)
                    commit_positions(consumer)  # after Redis holds them: at least once
                if time.monotonic() >= next_sweep:
                    self.sweep()
                    next_sweep = time.monotonic() + self.config.sweep_interval_s
        except (KafkaException, redis.RedisError) as exc:
            raise KadenceError(f"archiver stopped: {exc}") from exc
        finally:
            consumer.close()
            self._producer.close(10)
            log.info("archiver for namespace %s stopped", self.kafka.namespace)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Assigned here at the committed offsets, so librdkafka sends no query of its own (one
        refused with NOT_COORDINATOR is never retried: librdkafka #5586)."""
        if not partitions:
            return
        try:
            assign_at_committed(
                consumer, partitions, timeout=30, what=self.topics.history, who="archiver", stop=self._stop, log=log
            )
        except BrokerUnavailableError:  # stopping: the partitions are given up unread
            return

    def ingest(self, msgs: list[Message]) -> None:
        """Record events (and tombstones) of ``{ns}.history`` in Redis; idempotent."""
        pipe = self.redis.pipeline(transaction=False)
        for msg in msgs:
            key = msg.key()
            if key is None:
                continue
            try:
                wf, run_id, seq = key.decode().rsplit("/", 2)
                int(seq)
            except (UnicodeDecodeError, ValueError):
                log.warning(
                    "history record with a malformed key at partition %d offset %d", msg.partition(), msg.offset()
                )
                continue
            rkey = self.keys.run(f"{wf}/{run_id}")
            value = msg.value()
            if value is None:
                pipe.hdel(rkey, seq, f"o{seq}")
                continue
            pipe.hset(rkey, mapping={"p": msg.partition() or 0, seq: value, f"o{seq}": msg.offset() or 0})
            try:
                ev = self._codec.decode(msg.value())
            except SchemaError:
                log.error(
                    "undecodable history event of workflow %s run %s at partition %d offset %d",
                    wf,
                    run_id,
                    msg.partition(),
                    msg.offset(),
                )
                continue
            if ev["attributes"][0] in CLOSE_EVENTS:
                pipe.zadd(self.keys.closed, {f"{wf}/{run_id}": ev["timestamp_ms"]})
        pipe.execute()
        self.metrics.events.inc(len(msgs))

    # -- the sweep -----------------------------------------------------------------------------------

    def due(self, now: int | None = None, limit: int | None = None) -> list[str]:
        cutoff = (now if now is not None else now_ms()) - int(self.config.retention_s * 1000)
        members = cast(
            "list[bytes]",
            self.redis.zrangebyscore(self.keys.closed, "-inf", cutoff, start=0, num=limit or self.config.batch),
        )
        return [m.decode() for m in members]

    def sweep(self, now: int | None = None) -> SweepReport:
        """Archive every run that is due, a batch at a time."""
        t0 = time.perf_counter()
        total = SweepReport()
        while not self._stop.is_set():
            members = self.due(now)
            if not members:
                break
            report = self._archive_batch(members)
            for k in SWEEP_OUTCOMES:
                setattr(total, k, getattr(total, k) + getattr(report, k))
            if report.failed == len(members):
                break  # nothing moves (e.g. the store is down): try again at the next sweep
        if total.archived or total.reused or total.held or total.failed:
            log.info(
                "archive sweep: %d archived, %d reused, %d held, %d failed",
                total.archived,
                total.reused,
                total.held,
                total.failed,
            )
        self.redis.hset(self.keys.stats, "last_sweep_ms", now_ms())
        for k in SWEEP_OUTCOMES:
            self.metrics.runs[k].inc(getattr(total, k))
        self.metrics.sweep.observe(time.perf_counter() - t0)
        return total

    def _archive_batch(self, members: list[str]) -> SweepReport:
        report = SweepReport()
        ready: list[tuple[str, int, list[str], str]] = []  # member, partition, history keys, uri
        for member in members:
            try:
                outcome = self._write_verified(member)
            except (ArchiveError, OSError) as exc:
                wf, run_id = _split(member)
                log.error("archive of workflow %s run %s failed: %s", wf, run_id, exc)
                report.failed += 1
                continue
            if outcome is None:
                report.held += 1
                continue
            kind, partition, keys, uri = outcome
            setattr(report, kind, getattr(report, kind) + 1)
            ready.append((member, partition, keys, uri))
        if not ready:
            return report
        # the archive is verified: now, and only now, the Kafka copy goes
        for member, partition, keys, uri in ready:
            wf, run_id = _split(member)
            for k in keys:
                self._producer.produce(self.topics.history, None, k.encode(), partition=partition)
            purge = command(
                wf,
                "PurgeClosedRun",
                {"run_id": run_id, "archive_uri": uri, "identity": self.config.identity},
                request_id=f"purge:{run_id}",
                run_id=run_id,
            )
            self._producer.produce(self.topics.commands, self._cmd_codec.encode(purge), wf.encode())
        failure = self._producer.flush(30)
        if failure is not None:
            log.error("tombstones of %d runs not acknowledged (%s); retried at the next sweep", len(ready), failure)
            report.failed += len(ready)
            report.archived = report.reused = 0
            return report
        pipe = self.redis.pipeline(transaction=False)
        for member, *_rest in ready:
            pipe.zrem(self.keys.closed, member)
            pipe.delete(self.keys.run(member))
        pipe.hincrby(self.keys.stats, "archived", report.archived)
        pipe.hincrby(self.keys.stats, "reused", report.reused)
        pipe.execute()
        for member, partition, keys, uri in ready:
            wf, run_id = _split(member)
            log.debug(
                "workflow %s run %s archived to %s, %d events tombstoned on partition %d",
                wf,
                run_id,
                uri,
                len(keys),
                partition,
            )
        return report

    def _write_verified(self, member: str) -> tuple[str, int, list[str], str] | None:
        """("archived" | "reused", partition, history keys, uri) once a verified archive of the run
        exists; None when the run is held back (not archivable as it is)."""
        wf, run_id = _split(member)
        ns = self.kafka.namespace
        raw = cast("dict[bytes, bytes]", self.redis.hgetall(self.keys.run(member)))
        partition = int(raw.pop(b"p", b"-1"))
        values = {int(k): v for k, v in raw.items() if not k.startswith(b"o")}
        offsets = {int(k[1:]): int(v) for k, v in raw.items() if k.startswith(b"o")}
        n = len(values)
        key = archive_key(ns, wf, run_id)
        existing = self.store.get(key)
        if existing is not None:
            # an earlier sweep got this far (a crash, or a replay of the topic): reuse the archive
            # if it is whole and agrees with every event Redis still holds
            archived = decode_archive(existing)
            verify_archive(existing, ns, wf, run_id, [r["value"] for r in archived.records])
            by_seq = {r["seq"]: r["value"] for r in archived.records}
            if any(by_seq.get(s) != v for s, v in values.items()):
                self._hold(member, "an archive of the run exists and differs from its history")
                return None
            return (
                "reused",
                archived.records[0]["partition"],
                [r["key"] for r in archived.records],
                self.store.uri(key),
            )
        if n == 0:  # tombstoned and no archive: nothing of the run is left to archive
            log.warning("workflow %s run %s: no events and no archive; forgetting it", wf, run_id)
            self.redis.zrem(self.keys.closed, member)
            self.redis.delete(self.keys.run(member))
            return None
        found = [values.get(i) for i in range(1, n + 1)]
        last = self._codec.decode(found[-1]) if found[-1] is not None else None
        ordered = [v for v in found if v is not None]
        if len(ordered) != n or last is None or last["attributes"][0] not in CLOSE_EVENTS:
            self._hold(member, f"history incomplete: {n} events, seqs not 1..{n} ending with a close")
            return None
        keys = [history_key(wf, run_id, i) for i in range(1, n + 1)]
        records = [
            {
                "seq": i,
                "key": keys[i - 1],
                "value": ordered[i - 1],
                "partition": partition,
                "offset": offsets.get(i, -1),
            }
            for i in range(1, n + 1)
        ]
        uri = self.store.put(key, encode_archive(ns, wf, run_id, records))
        data = self.store.get(key)
        if data is None:
            raise ArchiveError(f"archive {uri} is missing right after it was written")
        verify_archive(data, ns, wf, run_id, ordered)
        return "archived", partition, keys, uri

    def _hold(self, member: str, reason: str) -> None:
        wf, run_id = _split(member)
        log.error("workflow %s run %s held back from archival: %s", wf, run_id, reason)
        pipe = self.redis.pipeline(transaction=False)
        pipe.zrem(self.keys.closed, member)
        pipe.hset(self.keys.held, member, reason[:500])
        pipe.execute()

    # -- status --------------------------------------------------------------------------------------

    def status(self, now: int | None = None) -> dict[str, Any]:
        now = now if now is not None else now_ms()
        cutoff = now - int(self.config.retention_s * 1000)
        raw = cast("dict[bytes, bytes]", self.redis.hgetall(self.keys.stats))
        stats = {k.decode(): int(v) for k, v in raw.items()}
        return {
            "namespace": self.kafka.namespace,
            "retention_s": self.config.retention_s,
            "closed_waiting": self.redis.zcount(self.keys.closed, cutoff + 1, "+inf"),
            "due": self.redis.zcount(self.keys.closed, "-inf", cutoff),
            "held": self.redis.hlen(self.keys.held),
            "archived": stats.get("archived", 0),
            "reused": stats.get("reused", 0),
            "last_sweep_ms": stats.get("last_sweep_ms"),
        }

    def close(self) -> None:
        self._producer.close(10)
        self.redis.close()
