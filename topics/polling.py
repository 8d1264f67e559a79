"""Consumption helpers: adaptive batches (wait for one record, then take whatever else is
there), resuming paused partitions so that they fetch at once, and the consumer errors that are
a setting the broker refuses."""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from .errors import ConfigError

__all__ = ["consumed_at", "poll_ready", "raise_if_refused", "resume_awake"]

log = logging.getLogger(__name__)


def consumed_at(msg: Message) -> tuple[int, int]:
    """``(partition, offset)`` of a record a consumer delivered: both are set on every consumed
    record (the client's types allow None, for a message a producer reports)."""
    partition, offset = msg.partition(), msg.offset()
    assert partition is not None and offset is not None
    return partition, offset


def poll_ready(consumer: Consumer, most: int, timeout: float) -> list[Any]:
    """Up to ``most`` records: block up to ``timeout`` for the first, not at all for the rest.

    ``consumer.consume(n, timeout)`` alone waits for n records or the whole timeout, which adds
    the timeout to every step at light load; this returns as soon as anything is ready, and
    large batches come by themselves under heavy load."""
    first = consumer.poll(timeout)
    if first is None:
        return []
    if most <= 1:
        return [first]
    return [first, *consumer.consume(num_messages=most - 1, timeout=0)]


def resume_awake(consumer: Consumer, positions: list[TopicPartition]) -> None:
    """Resume paused partitions and make them fetch at once.

    ``positions``: the partitions, each with the offset it stands at (``consumer.position()``:
    the next record not yet handed to the application; negative when it has none yet).
    librdkafka does not wake a partition's fetcher on resume: the next fetch would start only at
    the fetcher's next periodic look, up to a second later (measured in the processor: 950 ms,
    decision 0028; in the worker, a backlog pause at 512 workflows in flight cut 3-activity
    throughput to 130-275 wf/s). A seek to the position wakes the fetcher of its leader and
    skips or repeats nothing (a pause drops only records not yet handed over); without a
    leader epoch the seek asks the broker for nothing. Partitions without a position fetch by
    themselves."""
    consumer.resume(positions)
    for tp in positions:
        if tp.offset >= 0:
            try:
                consumer.seek(tp)
            except KafkaException as exc:  # then the fetcher wakes by itself, later
                log.debug("seek %s[%d] on resume: %s", tp.topic, tp.partition, exc)


def raise_if_refused(err: KafkaError, *, session_timeout_ms: int) -> None:
    """Raise ``ConfigError`` when a consumer error is a setting the broker refuses; such an error
    repeats for ever (a processor with a session timeout below the broker's minimum warned every
    two seconds and never joined its group), so the process stops with the reason instead."""
    if err.code() == KafkaError.INVALID_SESSION_TIMEOUT:
        raise ConfigError(
            f"the broker refuses the group session timeout {session_timeout_ms} ms (KADENCE_SESSION_TIMEOUT_MS): "
            "it must lie within the broker's group.min.session.timeout.ms and group.max.session.timeout.ms "
            "(6000 and 1800000 by default)"
        )
