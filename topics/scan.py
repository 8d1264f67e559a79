"""Bounded reads: one partition from an offset to an end fixed in advance (``RangeReader`` and
``read_range``, the one reader that the restore, the history reads and the scans share), and a
whole topic (``scan``). Committed records only."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from .config import KafkaConfig
from .errors import BrokerUnavailableError
from .partitioner import partition_for
from .polling import poll_ready

__all__ = ["SETTLE_S", "RangeReader", "read_range", "scan"]


#: how long a read that has passed the committed end it started from waits for open
#: transactions to end before it returns what it has (``RangeReader``'s ``settle_from``)
SETTLE_S = 2.0


class RangeReader:
    """The records of one partition from ``start`` until the position reaches ``end``, with
    ``consumer`` assigned to it alone; iterate once. ``position`` is where the read stopped.

    Transaction markers take offsets and are never delivered, so the read stops on the
    position, not on the last record. ``BrokerUnavailableError`` when the position has not moved
    for ``stall_s`` (an open transaction of a dead producer holds a read_committed consumer until
    the broker aborts it; a broker that stopped answering); a slow read that progresses goes on.

    ``settle_from``: for a read whose ``end`` is the high watermark (records of transactions
    still open included), the last stable offset read at the same time. Past it, a position
    that has not moved for ``settle_s`` ends the read quietly: everything committed when the
    read began has been read, and what an open transaction holds is not waited for longer.
    ``on_progress(records so far)`` is called about every 5 s of a long read."""

    def __init__(
        self,
        consumer: Consumer,
        tp: TopicPartition,
        start: int,
        end: int,
        *,
        stall_s: float = 30.0,
        settle_from: int | None = None,
        settle_s: float = SETTLE_S,
        what: str = "",
        on_progress: Callable[[int], None] | None = None,
    ) -> None:
        self.consumer, self.tp, self.start, self.end = consumer, tp, start, end
        self.stall_s, self.settle_from, self.settle_s = stall_s, settle_from, settle_s
        self.label = what or f"{tp.topic}[{tp.partition}]"
        self.on_progress = on_progress
        self.position = start

    def __iter__(self) -> Iterator[Any]:
        consumer, tp = self.consumer, self.tp
        consumer.assign([TopicPartition(tp.topic, tp.partition, self.start)])
        moved = time.monotonic()
        count, next_report = 0, time.monotonic() + 5
        while self.position < self.end:
            # past the stable offset, records come only when a transaction ends: look often
            waiting = self.settle_from is not None and self.position >= self.settle_from
            for msg in poll_ready(consumer, 1000, 0.05 if waiting else 0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise BrokerUnavailableError(f"read of {self.label} failed: {err.str()}")
                count += 1
                yield msg
            now = time.monotonic()
            positions = consumer.position([TopicPartition(tp.topic, tp.partition)])
            current = positions[0].offset if positions else -1
            if current > self.position:
                self.position, moved = current, now
            elif waiting and now - moved > self.settle_s:
                return  # the rest belongs to transactions open since before the read
            elif now - moved > self.stall_s:
                raise BrokerUnavailableError(
                    f"read of {self.label} stalled at offset {self.position} of {self.end} for {self.stall_s:.0f}s "
                    "(an open transaction of a dead producer holds the partition until the broker aborts it)"
                )
            if self.on_progress is not None and now >= next_report:
                self.on_progress(count)
                next_report = now + 5


def read_range(
    consumer: Consumer,
    tp: TopicPartition,
    start: int,
    end: int,
    *,
    stall_s: float = 30.0,
    what: str = "",
    on_progress: Callable[[int], None] | None = None,
) -> Iterator[Any]:
    """Yield the records of ``tp`` from offset ``start`` until the position reaches ``end`` (an
    end offset read before): a ``RangeReader`` whose stopping position is not needed."""
    return iter(RangeReader(consumer, tp, start, end, stall_s=stall_s, what=what, on_progress=on_progress))


def scan(
    config: KafkaConfig,
    topic: str,
    *,
    timeout: float = 30.0,
    since_ms: int | None = None,
    on_total: Callable[[int], object] | None = None,
    for_keys: Collection[str] | None = None,
) -> Iterator[Any]:
    """Yield every committed record of ``topic``, partition by partition, in offset order.

    ``for_keys``: only the partitions these keys are produced to (the default partitioner's:
    ``partitioner.partition_for``); the caller picks the keys' records from them.
    ``since_ms``: only records with a timestamp from then on (epoch ms). ``on_total(n)`` is told,
    before the first record, how many offsets the scan covers (an upper bound: transaction markers
    take offsets too), for a progress bar.

    For operators' tools and checks; the engine's restore has its own reader."""
    consumer = Consumer(config.consumer(None))
    try:
        try:
            md = consumer.list_topics(topic, timeout=timeout).topics[topic]
            ranges = []
            wanted = sorted(md.partitions)
            if for_keys is not None:
                wanted = sorted({partition_for(key, len(md.partitions)) for key in for_keys})
            for p in wanted:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
                if since_ms is not None and high > low:
                    (found,) = consumer.offsets_for_times([TopicPartition(topic, p, since_ms)], timeout=timeout)
                    low = high if found.offset < 0 else max(low, found.offset)  # -1: nothing that recent
                if high > low:
                    ranges.append((p, low, high))
        except KafkaException as exc:
            raise BrokerUnavailableError(f"cannot read {topic}: {exc}") from exc
        if on_total is not None:
            on_total(sum(high - low for _p, low, high in ranges))
        for p, low, high in ranges:
            yield from read_range(consumer, TopicPartition(topic, p), low, high, stall_s=timeout)
    finally:
        consumer.close()
