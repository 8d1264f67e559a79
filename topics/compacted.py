"""A compacted topic followed as a table: key -> its latest decoded value.

``CompactedTable`` reads every partition of a small compacted topic (one record per key: the
build new workflows of a queue start on, a queue's rate limits) with a plain consumer assigned
from the beginning, without a group: ``start`` reads to the end (so the first decision made on
it sees everything acknowledged before), ``poll`` applies what has arrived since without
blocking. A null value deletes the key; a value that does not decode is logged and skipped (the
key keeps its previous value), so one bad record never stops its reader.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition

from .config import KafkaConfig
from .errors import BrokerUnavailableError, KadenceError
from .kafka_access import authorization_error

__all__ = ["CompactedTable"]

log = logging.getLogger(__name__)

V = TypeVar("V")


class CompactedTable(Generic[V]):
    """Key -> latest value of ``topic``; ``on_change(key, old, new)`` after each change (None:
    absent). Used from one thread."""

    def __init__(
        self,
        kafka: KafkaConfig,
        topic: str,
        decode: Callable[[str, bytes], V],
        on_change: Callable[[str, V | None, V | None], None] | None = None,
    ) -> None:
        self.topic = topic
        self.rows: dict[str, V] = {}
        self._decode = decode
        self._on_change = on_change
        self._consumer = Consumer(kafka.waiting_consumer(None))
        self._namespace = kafka.namespace
        self._security = kafka.security
        self._tps: list[TopicPartition] = []

    def start(self, timeout: float = 30.0) -> None:
        """Assign every partition from the beginning and read to the end."""
        try:
            md = self._consumer.list_topics(self.topic, timeout=timeout).topics.get(self.topic)
        except KafkaException as exc:
            raise BrokerUnavailableError(f"cannot read {self.topic}: {exc}") from exc
        if md is not None and md.error is not None:
            denied = authorization_error(
                md.error, resource=self.topic, namespace=self._namespace, security=self._security
            )
            if denied is not None:
                raise denied
        if md is None or md.error is not None or not md.partitions:
            raise KadenceError(f"topic {self.topic} is missing (run `kadence topics apply`)")
        self._tps = [TopicPartition(self.topic, p) for p in sorted(md.partitions)]
        ends = {tp.partition: self._high_watermark(tp, timeout) for tp in self._tps}
        self._consumer.assign([TopicPartition(self.topic, tp.partition, OFFSET_BEGINNING) for tp in self._tps])
        deadline = time.monotonic() + timeout
        while True:
            positions = self._consumer.position(self._tps)
            if all(tp.offset >= ends[tp.partition] for tp in positions if ends[tp.partition] > 0):
                break
            if time.monotonic() > deadline:
                raise BrokerUnavailableError(f"{self.topic} not read to its end within {timeout}s")
            for msg in self._consumer.consume(500, timeout=0.1):
                self._apply(msg)

    def _high_watermark(self, tp: TopicPartition, timeout: float) -> int:
        """The partition's end offset; retried while its leader is not elected yet (a topic
        created a moment ago)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self._consumer.get_watermark_offsets(tp, timeout=timeout)[1]
            except KafkaException as exc:
                err = exc.args[0]
                if (
                    not err.retriable() and err.code() != KafkaError.NOT_LEADER_FOR_PARTITION
                ) or time.monotonic() > deadline:
                    raise BrokerUnavailableError(f"cannot read {self.topic}: {exc}") from exc
                time.sleep(0.1)

    def poll(self) -> None:
        """Apply what has arrived; never blocks."""
        for msg in self._consumer.consume(100, timeout=0):
            self._apply(msg)

    def _apply(self, msg: Message) -> None:
        raw_key = msg.key()
        if msg.error() is not None or raw_key is None:
            return
        key = raw_key.decode(errors="replace")
        value = msg.value()
        new: V | None = None
        if value is not None:
            try:
                new = self._decode(key, value)
            except KadenceError as exc:
                log.warning(
                    "ignoring the record for %r at %s[%d]@%d: %s",
                    key,
                    msg.topic(),
                    msg.partition(),
                    msg.offset(),
                    exc,
                )
                return
        old = self.rows.pop(key, None)
        if new is not None:
            self.rows[key] = new
        if self._on_change is not None:
            self._on_change(key, old, new)

    def close(self) -> None:
        try:
            self._consumer.close()
        except RuntimeError:
            pass
