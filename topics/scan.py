"""Read a topic from its start to the end it had when the scan began (committed records only)."""

from __future__ import annotations

from typing import Iterator

from confluent_kafka import Consumer, KafkaException, TopicPartition

from .config import KafkaConfig
from .errors import BrokerUnavailableError

__all__ = ["scan"]


def scan(config: KafkaConfig, topic: str, *, timeout: float = 30.0, since_ms: int | None = None,
         on_total=None) -> Iterator:
    """Yield every committed record of ``topic``, partition by partition, in offset order.

    ``since_ms``: only records with a timestamp from then on (epoch ms). ``on_total(n)`` is told,
    before the first record, how many offsets the scan covers (an upper bound: transaction markers
    take offsets too), for a progress bar.

    For operators' tools and checks; the engine's restore has its own reader."""
    consumer = Consumer(config.consumer(None))
    try:
        try:
            md = consumer.list_topics(topic, timeout=timeout).topics[topic]
            ranges = []
            for p in sorted(md.partitions):
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
            tp = TopicPartition(topic, p)
            consumer.assign([TopicPartition(topic, p, low)])
            # transaction markers take offsets too: stop on the position, not on the last record
            while consumer.position([tp])[0].offset < high:
                for msg in consumer.consume(1000, timeout=0.5):
                    if msg.error() is None:
                        yield msg
    finally:
        consumer.close()
