"""Read the latest state of every workflow from the compacted ``{ns}.state`` topic."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from . import serde
from .catalogue import Catalogue
from .config import KafkaConfig

__all__ = ["read_states", "stuck_workflows"]


def read_states(config: KafkaConfig) -> dict[str, dict]:
    """workflow ID -> its latest state record (tombstones remove)."""
    topic = Catalogue(config).state
    consumer = Consumer(config.consumer(None))
    states: dict[str, dict] = {}
    try:
        md = consumer.list_topics(topic, timeout=10).topics[topic]
        for p in sorted(md.partitions):
            tp = TopicPartition(topic, p)
            low, high = consumer.get_watermark_offsets(tp, timeout=10)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            while consumer.position([tp])[0].offset < high:
                for msg in consumer.consume(1000, timeout=0.5):
                    if msg.error() or msg.key() is None:
                        continue
                    if msg.value() is None:
                        states.pop(msg.key().decode(), None)
                    else:
                        states[msg.key().decode()] = serde.decode("WorkflowState", msg.value())
    finally:
        consumer.close()
    return states


def stuck_workflows(config: KafkaConfig) -> list[dict]:
    """Running workflows whose last workflow task failed, oldest start first."""
    stuck = [s for s in read_states(config).values() if s["status"] == "running" and s["wt_failure"]]
    return sorted(stuck, key=lambda s: s["start_time_ms"])
