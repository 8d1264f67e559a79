"""Consumer lag per component (issue 21): how many records each engine consumer has still to read.

One gauge family, ``kadence_consumer_lag_records{namespace, component, topic}``, in the registry of every
process that consumes with librdkafka (processor, timer service, worker, bridge, archiver; the
projections report their own lag). Per topic it is the sum over the consumer's assigned
partitions of the high watermark minus the position, the figure ``kafka-consumer-groups`` shows
as LAG: a transaction's commit marker counts as one record, so an idle topic written in
transactions can read about one per partition.

The numbers are local to the client: the position is what the consumer has handed over, the
high watermark comes with every fetch response (``get_watermark_offsets(cached=True)``), so a
sample sends no request. A partition not fetched from yet counts 0 until its first fetch. Sampling happens on the
thread that polls the consumer (the only thread that calls into it), at most once a second.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaException
from prometheus_client import CollectorRegistry, Gauge

__all__ = ["LagSampler", "lag_gauge"]

#: seconds between two samples of one consumer
SAMPLE_INTERVAL_S = 1.0


def lag_gauge(registry: CollectorRegistry) -> Gauge:
    """The family, registered in ``registry`` (once per registry: one per process and component)."""
    return Gauge(
        "kadence_consumer_lag_records",
        "records not yet read by a component's consumer: high watermark minus position, summed over "
        "its assigned partitions of the topic",
        ["namespace", "component", "topic"],
        registry=registry,
    )


class LagSampler:
    """``sample(consumer)`` sets the gauge's series of ``namespace`` and ``component`` from the consumer's present
    assignment, at most every ``interval_s``; topics no longer assigned lose their series. A
    sampler with no gauge does nothing."""

    def __init__(
        self,
        gauge: Gauge | None,
        namespace: str,
        component: str,
        *,
        interval_s: float = SAMPLE_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._gauge, self._labels = gauge, (namespace, component)
        self._interval, self._clock = interval_s, clock
        self._next = 0.0
        self._topics: set[str] = set()

    def sample(self, consumer: Consumer) -> None:
        if self._gauge is None:
            return
        now = self._clock()
        if now < self._next:
            return
        self._next = now + self._interval
        lag: dict[str, int] = defaultdict(int)
        try:
            assigned = consumer.assignment()
            for tp in consumer.position(assigned) if assigned else []:
                _low, high = consumer.get_watermark_offsets(tp, cached=True)
                # not fetched from yet (no position or watermark): 0, but the topic's series exists
                lag[tp.topic] += max(0, high - tp.offset) if tp.offset >= 0 and high >= 0 else 0
        except (KafkaException, RuntimeError):  # the broker restarting, a closed consumer: next time
            return
        for topic in self._topics - lag.keys():
            self._gauge.remove(*self._labels, topic)
        for topic, n in lag.items():
            self._gauge.labels(*self._labels, topic).set(n)
        self._topics = set(lag)
