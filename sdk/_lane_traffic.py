"""How fast each priority lane of a task queue grows, for a worker's share of the queue's rate
limit (``_rate_limit``): a thread that, while a limit applies, reads the end offsets of every
partition of every lane once a second and hands the rates (records a second, smoothed) to the
limiter. Commit markers take offsets too, so the rates are of records, not tasks: what matters
is their proportion. One ListOffsets request per lane partition a second, only while limited."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaException, TopicPartition

from kadence.topics.config import KafkaConfig

if TYPE_CHECKING:
    from ._rate_limit import QueueRateLimiter

__all__ = ["LaneTraffic"]

log = logging.getLogger(__name__)


class LaneTraffic:
    #: seconds between reads of the lanes' end offsets
    PERIOD_S = 1.0
    #: weight of the newest rate in the smoothed one
    ALPHA = 0.5

    def __init__(self, config: KafkaConfig, lanes: list[str], partitions: int, limiter: QueueRateLimiter) -> None:
        self._config = config
        self._lanes = lanes
        self._partitions = partitions
        self._limiter = limiter
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kadence-lane-traffic", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _ends(self, consumer: Consumer) -> dict[str, int]:
        return {
            lane: sum(
                consumer.get_watermark_offsets(TopicPartition(lane, p), timeout=5)[1] for p in range(self._partitions)
            )
            for lane in self._lanes
        }

    def _run(self) -> None:
        consumer: Consumer | None = None
        last: tuple[float, dict[str, int]] | None = None
        rates: dict[str, float] = {}
        try:
            while not self._stop.wait(self.PERIOD_S):
                if not self._limiter.active:
                    last, rates = None, {}
                    continue
                if consumer is None:
                    consumer = Consumer(self._config.consumer(None))
                try:
                    ends, now = self._ends(consumer), time.monotonic()
                except KafkaException as exc:  # the broker away: the share stays as it was
                    log.debug("lane end offsets: %s", exc)
                    continue
                if last is not None and now > last[0]:
                    for lane, end in ends.items():
                        rate = max(0, end - last[1].get(lane, end)) / (now - last[0])
                        rates[lane] = self.ALPHA * rate + (1 - self.ALPHA) * rates.get(lane, rate)
                    self._limiter.set_lane_rates(rates)
                last = (now, ends)
        finally:
            if consumer is not None:
                consumer.close()
