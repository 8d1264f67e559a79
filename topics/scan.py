"""Read a topic from its start to the end it had when the scan began (committed records only)."""

from __future__ import annotations

from typing import Iterator

from confluent_kafka import Consumer, KafkaException, TopicPartition

from .config import KafkaConfig
from .errors import BrokerUnavailableError

__all__ = ["scan"]


def scan(config: KafkaConfig, topic: str, *, timeout: float = 30.0) -> Iterator:
    """Yield every committed record of ``topic``, partition by partition, in offset order.

    For operators' tools and checks over development-sized topics; the engine's restore has its
    own reader with progress reporting."""
    consumer = Consumer(config.consumer(None))
    try:
        try:
            md = consumer.list_topics(topic, timeout=timeout).topics[topic]
        except KafkaException as exc:
            raise BrokerUnavailableError(f"cannot read {topic}: {exc}") from exc
        for p in sorted(md.partitions):
            tp = TopicPartition(topic, p)
            low, high = consumer.get_watermark_offsets(tp, timeout=timeout)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            # transaction markers take offsets too: stop on the position, not on the last record
            while consumer.position([tp])[0].offset < high:
                for msg in consumer.consume(1000, timeout=0.5):
                    if msg.error() is None:
                        yield msg
    finally:
        consumer.close()
