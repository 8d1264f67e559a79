"""``LagSampler``: per topic, high watermark minus position over the assigned partitions."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from prometheus_client import CollectorRegistry

from kadence.topics.consumer_lag import LagSampler, lag_gauge


class _Consumer:
    def __init__(self, parts: dict[tuple[str, int], tuple[int, int]]):
        #: (topic, partition) -> (position, high watermark)
        self.parts = parts
        self.fail = False

    def assignment(self):
        if self.fail:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return [TopicPartition(t, p) for t, p in self.parts]

    def position(self, tps):
        return [TopicPartition(tp.topic, tp.partition, self.parts[(tp.topic, tp.partition)][0]) for tp in tps]

    def get_watermark_offsets(self, tp, cached=False):
        assert cached  # a sample must not ask the broker
        return 0, self.parts[(tp.topic, tp.partition)][1]


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _value(registry, component, topic):
    return registry.get_sample_value(
        "kadence_consumer_lag_records", {"namespace": "ns", "component": component, "topic": topic}
    )


def test_lag_is_summed_per_topic_and_unknown_partitions_count_zero():
    registry, clock = CollectorRegistry(), _Clock()
    sampler = LagSampler(lag_gauge(registry), "ns", "processor", clock=clock)
    consumer = _Consumer({("a", 0): (10, 15), ("a", 1): (3, 3), ("a", 2): (-1001, 40), ("b", 0): (7, 9)})
    sampler.sample(consumer)
    assert _value(registry, "processor", "a") == 5
    assert _value(registry, "processor", "b") == 2


def test_samples_at_most_once_an_interval_and_drops_topics_no_longer_held():
    registry, clock = CollectorRegistry(), _Clock()
    sampler = LagSampler(lag_gauge(registry), "ns", "worker", clock=clock)
    consumer = _Consumer({("a", 0): (10, 15), ("b", 0): (0, 4)})
    sampler.sample(consumer)
    consumer.parts = {("a", 0): (15, 15)}
    clock.now += 0.5
    sampler.sample(consumer)  # too soon: unchanged
    assert _value(registry, "worker", "a") == 5 and _value(registry, "worker", "b") == 4
    clock.now += 0.6
    sampler.sample(consumer)
    assert _value(registry, "worker", "a") == 0
    assert _value(registry, "worker", "b") is None


def test_a_consumer_error_keeps_the_last_sample_and_no_gauge_records_nothing():
    registry, clock = CollectorRegistry(), _Clock()
    sampler = LagSampler(lag_gauge(registry), "ns", "bridge", clock=clock)
    consumer = _Consumer({("a", 0): (1, 3)})
    sampler.sample(consumer)
    consumer.fail = True
    clock.now += 2
    sampler.sample(consumer)
    assert _value(registry, "bridge", "a") == 2
    LagSampler(None, "ns", "bridge").sample(consumer)  # does not even call the consumer
