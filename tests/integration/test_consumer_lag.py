"""``kadence_consumer_lag_records`` on a real consumer: the records of the held partitions not yet
read, from the client's own position and cached high watermark (no request to the broker)."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client import CollectorRegistry

from kadence.topics.consumer_lag import LagSampler, lag_gauge


def _read(consumer: Consumer, n: int) -> None:
    got, deadline = 0, time.monotonic() + 60
    while got < n and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got += 1
    assert got == n


def test_the_lag_falls_as_the_consumer_reads(kafka_bootstrap):
    topic = f"lag-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(200):
        producer.produce(topic, str(i).encode())
    assert producer.flush(30) == 0
    # the position is what was handed over, not what was fetched (all 200 are, at once)
    consumer = Consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    registry, clock = CollectorRegistry(), [0.0]
    sampler = LagSampler(lag_gauge(registry), "ns", "processor", clock=lambda: clock[0])

    def lag():
        clock[0] += 10
        sampler.sample(consumer)
        return registry.get_sample_value(
            "kadence_consumer_lag_records", {"namespace": "ns", "component": "processor", "topic": topic}
        )

    try:
        _read(consumer, 50)
        assert lag() == 150
        _read(consumer, 150)
        assert lag() == 0
    finally:
        consumer.close()
