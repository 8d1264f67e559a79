"""Read whole runs from the history topic (for replay checks and operators' tools)."""

from __future__ import annotations

import collections

from confluent_kafka import Consumer, TopicPartition

from . import serde
from .catalogue import Catalogue
from .config import KafkaConfig

__all__ = ["read_runs"]

_CLOSES = {"WorkflowExecutionCompleted", "WorkflowExecutionFailed", "WorkflowExecutionCanceled",
           "WorkflowExecutionTerminated", "WorkflowExecutionContinuedAsNew", "WorkflowExecutionTimedOut"}


def read_runs(config: KafkaConfig, *, closed_only: bool = True, timeout: float = 60.0) -> list[list[dict]]:
    """Every run in ``{ns}.history`` (oldest first per run), committed events only.

    Reads the whole topic: meant for CI checks and development-sized namespaces."""
    topic = Catalogue(config).history
    consumer = Consumer(config.consumer(None, **{"enable.partition.eof": False}))
    runs: dict = collections.OrderedDict()
    try:
        md = consumer.list_topics(topic, timeout=timeout).topics[topic]
        for p in sorted(md.partitions):
            tp = TopicPartition(topic, p)
            low, high = consumer.get_watermark_offsets(tp, timeout=timeout)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            while consumer.position([tp])[0].offset < high:
                for msg in consumer.consume(1000, timeout=0.5):
                    if msg.error() or not msg.value():
                        continue
                    ev = serde.decode("HistoryEvent", msg.value())
                    runs.setdefault((ev["aggregate_key"], ev["run_id"]), []).append(ev)
    finally:
        consumer.close()
    out = []
    for events in runs.values():
        events.sort(key=lambda e: e["seq"])
        if closed_only and events[-1]["attributes"][0] not in _CLOSES:
            continue
        out.append(events)
    return out
