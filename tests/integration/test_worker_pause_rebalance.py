"""A worker's task consumer that paused its partitions (its backlog was full) and lost some of them
in a rebalance: when they come back, they fetch again. librdkafka keeps a partition's pause across
a rebalance, and the consumer resumed only the partitions it held when its backlog drained, so a
partition paused, taken away and given back stayed paused for good: a live worker polling and
getting nothing (``make soak``'s worker that ran no activity after the broker pause)."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kadence import KafkaConfig, Worker, activity
from kadence._task_consumer import TaskConsumer as _TaskConsumer

from .conftest import wait_until

PARTITIONS = 4
PER_PARTITION = 60  # 240 records: the backlog (at least 100 beyond the slots) fills and pauses
SLOTS = 2


@activity.defn
async def noop() -> None:
    return None


async def test_partitions_paused_revoked_and_given_back_fetch_again(kafka_bootstrap):
    topic, group = f"pause-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.produce(topic, f"{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0

    config = KafkaConfig(bootstrap=kafka_bootstrap, namespace="pause")
    worker = Worker(
        SimpleNamespace(engine=None, config=config, interceptors=(), converter=None),
        task_queue="q",
        activities=[noop],
        session_timeout_ms=6000,
    )
    held: list = []  # handed over and not finished: the slots stay busy until the test says
    seen: set = set()

    def handler(msg):
        seen.add((msg.partition(), msg.offset()))
        held.append(msg)

    tc = _TaskConsumer(worker, topic, group, handler, SLOTS)
    tc.start()
    other = None
    try:
        await wait_until(lambda: tc._paused, 60, "the task consumer to pause on its full backlog")
        # a second member joins: the first gives up half of its (paused) partitions
        other = Consumer(
            config.consumer(
                group, **{"partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": 6000}
            )
        )
        other.subscribe([topic])

        def other_holds_some() -> bool:
            other.poll(0.1)  # serves its rebalance callbacks; it reads nothing (committed: nothing)
            return bool(other.assignment())

        await wait_until(other_holds_some, 60, "the second member to take partitions")
        other.pause(other.assignment())
        # the first drains its backlog (and so resumes what it holds now) while those are elsewhere
        while len(seen) < PER_PARTITION * PARTITIONS // 2 or tc._paused:
            for msg in held:
                tc.done(msg)
            held.clear()
            await asyncio.sleep(0.05)
            if not tc._backlog and not tc._dispatched and not held:
                break
        other.close()  # ... and gets them back
        other = None

        def all_seen() -> bool:
            for msg in held:
                tc.done(msg)
            held.clear()
            return len(seen) == PER_PARTITION * PARTITIONS

        await wait_until(all_seen, 60, "every record of every partition, the ones given back included")
    finally:
        if other is not None:
            other.close()
        tc.stop()
        worker._activity_runner.close_unstarted()
    per_partition = {p: sum(1 for q, _ in seen if q == p) for p in range(PARTITIONS)}
    assert per_partition == {p: PER_PARTITION for p in range(PARTITIONS)}
