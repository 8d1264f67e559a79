"""A producer for batches that are acknowledged as a whole, and retried as a whole when not.

The bridges (commands from a source topic) and the archiver (tombstones and purge commands) work
in batches: produce every record, flush, and only then commit the source offsets or drop the
archived runs from Redis. A batch that is not acknowledged is produced again later from its
source, so a record may be written twice; both are safe for that (a command carries a request ID
the history processor deduplicates; a tombstone is idempotent).

What the plain ``Producer`` did not survive: librdkafka's idempotent producer can wedge after a
broker restart, taking records and sending none (librdkafka #5430; ``replacing_producer``). A
bridge retrying its batch through that producer only queued the batch again behind the stuck
one, for good. Here a flush that leaves records undelivered also retires the producer: the
records still queued in it are purged and the retry goes through a new one. While the broker is
really down this costs one new producer per failed batch (a flush waits 30 s), which is nothing
beside the wait; no metadata probe is needed to tell the two cases apart, unlike the engine
client's ``ReplacingProducer``, which keeps its records and must not produce them twice for
nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from .produce import produce_waiting

__all__ = ["BatchProducer"]

log = logging.getLogger(__name__)


class BatchProducer:
    """``produce()`` records, then ``flush()``: None when Kafka acknowledged every record since
    the last flush, else why not (and the next batch goes through a new producer).

    Used by one thread (the bridge's or the archiver's loop)."""

    def __init__(
        self, conf: dict[str, Any], *, who: str, factory: Callable[[dict[str, Any]], Producer] = Producer
    ) -> None:
        self._conf = conf
        self._factory = factory
        self._who = who
        self._producer = factory(conf)
        #: the delivery errors of the batch being produced (a new list per batch, so a retired
        #: producer's late reports land in a list nobody reads)
        self._errors: list[KafkaError] = []
        #: how many times the producer was retired
        self.replacements = 0

    def produce(self, topic: str, value: bytes | None, key: bytes | None, *, partition: int | None = None) -> None:
        """Queue one record, waiting while librdkafka's queue is full."""
        errors = self._errors

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                errors.append(err)

        produce_waiting(self._producer, topic, value, key, partition=partition, on_delivery=on_delivery)

    def flush(self, timeout: float) -> str | None:
        """Wait up to ``timeout`` s for the batch; None if every record was acknowledged."""
        remaining = self._producer.flush(timeout)
        errors, self._errors = self._errors, []
        if not remaining and not errors:
            return None
        if remaining:
            self._retire(remaining)
        if errors:
            return f"{len(errors) + remaining} records not acknowledged ({errors[0].str()})"
        return f"{remaining} records not acknowledged within {timeout:.0f} s"

    def _retire(self, remaining: int) -> None:
        old, self._producer = self._producer, self._factory(self._conf)
        self.replacements += 1
        log.warning(
            "%s: %d records undelivered after the flush; their producer is replaced and the batch will be "
            "produced again through the new one (librdkafka #5430)",
            self._who,
            remaining,
        )
        try:
            old.purge(in_queue=True, in_flight=True, blocking=False)
            old.flush(0)
        except (KafkaException, RuntimeError) as exc:
            log.debug("%s: the retired producer: %s", self._who, exc)

    def close(self, timeout: float = 10.0) -> int:
        """Flush what is left; returns how many records were not delivered."""
        return self._producer.flush(timeout)
