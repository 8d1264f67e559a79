"""Checks over the history topic: the invariants every test of the engine relies on."""

from __future__ import annotations

import collections
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kadence.topics import Catalogue, KafkaConfig, serde


def _watermarks(consumer: Consumer, tp: TopicPartition) -> tuple[int, int]:
    """The partition's offsets; a retriable error (a leader the broker is still electing, seen
    as NOT_LEADER_FOR_PARTITION on a loaded single broker in CI) is asked again for up to 30 s,
    as the engine's own readers wait (``CompactedTable``): 5 s was too short in one CI run, the
    replies topic of a namespace created a moment before, with the full suite beside it. The error
    librdkafka gives here is not flagged retriable (``retriable()`` is False for it): the codes of
    an election in progress are retried by name, as the engine's readers do (CI, session 65)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return consumer.get_watermark_offsets(tp, timeout=10)
        except KafkaException as exc:
            err = exc.args[0]
            electing = err.code() in _ELECTING
            if not (err.retriable() or electing) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


#: a partition whose leader the broker is still electing (a topic created a moment before)
_ELECTING = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE}


def read_topic(config: KafkaConfig, topic: str, record: str | None = None) -> list[tuple]:
    """Every (key, decoded value, partition, offset) of a topic, committed records only."""
    consumer = Consumer(config.consumer(None))
    md = consumer.list_topics(topic, timeout=10).topics[topic]
    out = []
    try:
        for p in md.partitions:
            low, high = _watermarks(consumer, TopicPartition(topic, p))
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            while consumer.position([TopicPartition(topic, p)])[0].offset < high:
                for msg in consumer.consume(500, timeout=0.5):
                    if msg.error():
                        continue
                    value = serde.decode(record, msg.value()) if record and msg.value() else msg.value()
                    out.append((msg.key(), value, p, msg.offset()))
        return out
    finally:
        consumer.close()


def histories(config: KafkaConfig) -> dict[tuple[str, str], list[dict]]:
    """(workflow_id, run_id) -> events in topic order."""
    runs: dict = collections.defaultdict(list)
    for _key, ev, _p, _o in read_topic(config, Catalogue(config).history, "HistoryEvent"):
        runs[(ev["aggregate_key"], ev["run_id"])].append(ev)
    return runs


def check_history(events: list[dict]) -> list[str]:
    """Violations of: seqs 1..n without gap or duplicate; one result per activity; one close."""
    problems = []
    seqs = [e["seq"] for e in events]
    if seqs != list(range(1, len(seqs) + 1)):
        problems.append(f"sequence numbers are not 1..n: {seqs}")
    results = collections.Counter()
    scheduled = collections.Counter()
    closes = 0
    for e in events:
        kind, attrs = e["attributes"]
        if kind in ("ActivityTaskCompleted", "ActivityTaskFailed"):
            results[attrs["activity_id"]] += 1
        elif kind == "ActivityTaskScheduled":
            scheduled[attrs["activity_id"]] += 1
        elif kind in ("WorkflowExecutionCompleted", "WorkflowExecutionFailed"):
            closes += 1
    for aid, n in results.items():
        if n != 1:
            problems.append(f"activity {aid} has {n} results")
    for aid, n in scheduled.items():
        if n != 1:
            problems.append(f"activity {aid} scheduled {n} times")
    if closes > 1:
        problems.append(f"{closes} close events")
    return problems
