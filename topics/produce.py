"""One way to hand a record to librdkafka when its queue may be full.

``Producer.produce`` raises ``BufferError`` when the local queue holds
``queue.buffering.max.messages`` records (or ``queue.buffering.max.kbytes``): the broker is
slower than the writer, or away. Every writer of the engine waits then, serving delivery reports
(``poll``) so the queue drains, and tries again: back-pressure, never a lost record. What else a
failed produce means (a record over ``message.max.bytes``, a fatal producer) is raised to the
caller, which knows what to say about it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from confluent_kafka import Producer

if TYPE_CHECKING:  # replacing_producer uses this module
    from .replacing_producer import ReplacingProducer

__all__ = ["produce_waiting"]


def produce_waiting(
    producer: Producer | ReplacingProducer,
    topic: str,
    value: bytes | None,
    key: bytes | None,
    *,
    partition: int | None = None,
    on_delivery: Callable[..., None] | None = None,
    timestamp: int | None = None,
    headers: list[tuple[str, bytes]] | None = None,
    wait_s: float = 0.05,
) -> None:
    """``producer.produce(...)``, waiting ``wait_s`` at a time (serving delivery reports) while
    librdkafka's queue is full. ``partition`` None: the producer's partitioner picks it;
    ``timestamp`` None: now."""
    kwargs: dict[str, Any] = {}
    if partition is not None:
        kwargs["partition"] = partition
    if on_delivery is not None:
        kwargs["on_delivery"] = on_delivery
    if timestamp is not None:
        kwargs["timestamp"] = timestamp
    if headers:
        kwargs["headers"] = headers
    while True:
        try:
            producer.produce(topic, value, key, **kwargs)
            return
        except BufferError:
            producer.poll(wait_s)
