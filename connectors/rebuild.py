"""Rebuild projections by replaying ``{ns}.history`` from offset 0 into a new generation, then
switch readers over atomically and delete the old generation.

Procedure (docs/projections.md has the operator's view):

1. take the projection's rebuild lock (``SET NX`` with a TTL, refreshed while running); a
   leftover ``building`` generation of an abandoned rebuild is deleted;
2. allocate generation ``M`` (``INCR genseq``, above the current pointer) and set
   ``building = M``: from the next batch on, the live projection process writes every batch to
   the current generation *and* to ``M`` (its Lua script resolves both); the seq guard drops
   live writes that arrive before the rebuild has replayed the run's earlier events, and
   drops the rebuild's writes of events the live process already put in ``M``;
3. replay every partition from offset 0 (its own reader, no consumer group) into ``M``, one
   Redis pipeline per batch, until, for every partition, its position has passed both the end
   offset sampled at the start and the position the live process has reached in the current
   generation (sampled again at the end): then every event the live process applied is in
   ``M``, and every later one reaches ``M`` through the live process;
4. switch: ``SET gen M`` and ``DEL building`` in one MULTI; every reader call resolves the
   pointer once, so it reads one generation or the other, never a mix;
5. after a grace period (for reader calls still on the old generation), delete the old
   generation's keys with SCAN + UNLINK in batches; release the lock.

The replay uses confluent-kafka (assign + seek to 0, read_committed) rather than a second
Faust app: see docs/decisions/0009-projection-rebuild-reader.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, TopicPartition
from redis.asyncio import Redis

from kadence.readmodels.keys import PROJECTIONS, ProjectionKeys
from kadence.readmodels.keys import text as _s
from kadence.topics.catalogue import Catalogue
from kadence.topics.config import KafkaConfig
from kadence.topics.errors import BrokerUnavailableError, ProjectionError

from .projection_sink import ProjectionSink, RawRecord

__all__ = ["RebuildReport", "delete_generation", "rebuild_projections"]

log = logging.getLogger(__name__)

LOCK_TTL_S = 60


@dataclass
class RebuildReport:
    generations: dict[str, Any] = field(default_factory=dict)  # projection -> (old, new)
    events: int = 0
    seconds: float = 0.0
    deleted_keys: int = 0

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0


async def delete_generation(redis: Redis, keys: ProjectionKeys, generation: int | str, batch: int = 1000) -> int:
    """UNLINK every key of one generation, in batches; returns how many were deleted."""
    deleted = 0
    cursor = 0
    while True:
        cursor, found = await redis.scan(cursor, match=keys.pattern(generation), count=batch)
        if found:
            deleted += await redis.unlink(*found)
        if cursor == 0:
            return deleted


async def _live_positions(redis: Redis, keys: ProjectionKeys) -> dict[int, int]:
    gen = _s(await redis.get(keys.pointer)) or "0"
    return {int(_s(k)): int(_s(v)) for k, v in (await redis.hgetall(f"{keys.prefix(gen)}pos")).items()}


async def rebuild_projections(
    kafka: KafkaConfig,
    redis: Redis,
    projections: tuple[str, ...] = PROJECTIONS,
    *,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    batch: int = 5000,
    grace_s: float = 1.0,
) -> RebuildReport:
    """Rebuild ``projections`` of ``kafka.namespace`` (see the module docstring). Raises
    ``ProjectionError`` when another rebuild holds the lock."""
    keys = {name: ProjectionKeys(kafka.namespace, name) for name in projections}
    token = uuid.uuid4().hex
    locked = []
    try:
        for name, k in keys.items():
            if not await redis.set(k.lock, token, nx=True, ex=LOCK_TTL_S):
                raise ProjectionError(f"a rebuild of {name} is already running in namespace {kafka.namespace}")
            locked.append(k)
        return await _rebuild_locked(kafka, redis, keys, token, on_progress, batch, grace_s)
    finally:
        for k in locked:
            if _s(await redis.get(k.lock)) == token:
                await redis.delete(k.lock)


async def _rebuild_locked(
    kafka: KafkaConfig,
    redis: Redis,
    keys: dict[str, ProjectionKeys],
    token: str,
    on_progress: Callable[[dict[str, Any]], None] | None,
    batch: int,
    grace_s: float,
) -> RebuildReport:
    report = RebuildReport()
    old_gen, new_gen = await _start_generations(redis, keys, kafka.namespace)

    sink = ProjectionSink(redis, kafka.namespace, tuple(keys))
    topic = Catalogue(kafka).history
    loop = asyncio.get_running_loop()
    consumer = Consumer(kafka.consumer(None, **{"enable.partition.eof": False}))
    t0 = time.monotonic()
    try:
        try:
            md = await loop.run_in_executor(None, lambda: consumer.list_topics(topic, timeout=30))
        except KafkaException as exc:
            raise BrokerUnavailableError(f"cannot read {topic}: {exc}") from exc
        parts = sorted(md.topics[topic].partitions)
        tps = [TopicPartition(topic, p) for p in parts]
        target: dict[int, int] = {}
        for tp in tps:
            _low, high = await loop.run_in_executor(None, consumer.get_watermark_offsets, tp, 30)
            target[tp.partition] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        position = {p: 0 for p in parts}
        last_lock = time.monotonic()
        last_report = 0.0
        while True:
            msgs = await loop.run_in_executor(None, consumer.consume, batch, 0.2)
            records = [_raw(m) for m in msgs if m.error() is None]
            if records:
                await sink.apply(records, new_gen)
                report.events += len(records)
            # positions include transaction markers: compare them, not the last record's offset
            for tp in consumer.position(tps):
                if tp.offset >= 0:
                    position[tp.partition] = tp.offset
            behind = {p: target[p] - position[p] for p in parts if position[p] < target[p]}
            if not behind:
                live: dict[int, int] = {}
                for k in keys.values():
                    for p, off in (await _live_positions(redis, k)).items():
                        live[p] = max(live.get(p, 0), off)
                for p, off in live.items():
                    if p in target and off > target[p]:
                        target[p] = off
                behind = {p: target[p] - position[p] for p in parts if position[p] < target[p]}
                if not behind:
                    break
            now = time.monotonic()
            if now - last_lock > 5:
                for k in keys.values():
                    await redis.set(k.lock, token, xx=True, ex=LOCK_TTL_S)
                last_lock = now
            if on_progress and now - last_report > 0.2:
                last_report = now
                elapsed = now - t0
                on_progress(
                    {
                        "events": report.events,
                        "events_per_s": report.events / elapsed if elapsed else 0.0,
                        "lag": sum(behind.values()),
                        "target": sum(target.values()),
                        "position": sum(position.values()),
                    }
                )
    finally:
        consumer.close()
    report.seconds = time.monotonic() - t0
    if on_progress:
        on_progress(
            {
                "events": report.events,
                "events_per_s": report.events_per_s,
                "lag": 0,
                "target": sum(target.values()),
                "position": sum(position.values()),
            }
        )

    await _switch_generations(redis, keys, kafka.namespace, old_gen, new_gen, report, grace_s)
    return report


def _raw(m: Message) -> RawRecord:
    """A consumed record as the sink takes it (one without an error has a partition and offset)."""
    partition, offset = m.partition(), m.offset()
    assert partition is not None and offset is not None
    return RawRecord(partition, offset, m.key(), m.value(), m.timestamp()[1])


async def _start_generations(
    redis: Redis, keys: dict[str, ProjectionKeys], namespace: str
) -> tuple[dict[str, str], dict[str, int]]:
    """(current, new) generation of each projection: a generation an abandoned rebuild left is
    deleted, and the new one is marked as being built."""
    new_gen: dict[str, int] = {}
    old_gen: dict[str, str] = {}
    for name, k in keys.items():
        stale = _s(await redis.get(k.building))
        if stale is not None:
            log.warning("deleting generation %s of %s left by an abandoned rebuild", stale, name)
            await redis.delete(k.building)
            await delete_generation(redis, k, stale)
        old_gen[name] = _s(await redis.get(k.pointer)) or "0"
        m = await redis.incr(k.genseq)
        if m <= int(old_gen[name]):
            m = int(old_gen[name]) + 1
            await redis.set(k.genseq, m)
        new_gen[name] = m
        await redis.set(k.building, m)
        log.info("rebuilding %s of namespace %s: generation %s -> %s", name, namespace, old_gen[name], m)
    return old_gen, new_gen


async def _switch_generations(
    redis: Redis,
    keys: dict[str, ProjectionKeys],
    namespace: str,
    old_gen: dict[str, str],
    new_gen: dict[str, int],
    report: RebuildReport,
    grace_s: float,
) -> None:
    """Point each projection at its rebuilt generation, then (after ``grace_s``, for readers
    still on the old one) delete the old generation's keys."""
    for name, k in keys.items():
        pipe = redis.pipeline(transaction=True)
        pipe.set(k.pointer, new_gen[name])
        pipe.delete(k.building)
        await pipe.execute()
        report.generations[name] = (old_gen[name], new_gen[name])
        log.info("switched %s of namespace %s to generation %s", name, namespace, new_gen[name])
    await asyncio.sleep(grace_s)
    for name, k in keys.items():
        report.deleted_keys += await delete_generation(redis, k, old_gen[name])
