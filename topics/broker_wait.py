"""Waiting for the broker instead of exiting: a long-running component (processor, timer service,
projections) started before the broker, or meeting a restart while it starts, retries the step
with backoff.

One loop for all of them (the processor and the timer service had a copy each); the async
client's ``Client.connect(wait_for_broker=...)`` keeps its own, because it awaits instead of
blocking a thread."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from .errors import BrokerUnavailableError

__all__ = ["assign_at_committed", "committed_offsets", "until_broker_answers"]

T = TypeVar("T")

#: first retry delay and the most a retry waits (seconds)
FIRST_DELAY_S = 0.2
MAX_DELAY_S = 5.0


def until_broker_answers(
    step: Callable[[], T], *, what: str, who: str, stop: threading.Event, log: logging.Logger
) -> T:
    """``step()``, retried while it raises ``BrokerUnavailableError``; a warning per retry names
    ``who`` and ``what``. Re-raises at once once ``stop`` is set (a stopping component does not
    wait); any other error propagates unchanged."""
    delay = FIRST_DELAY_S
    while True:
        try:
            return step()
        except BrokerUnavailableError as exc:
            if stop.is_set():
                raise
            log.warning("%s: %s: waiting for the broker (%s); retrying in %.1f s", who, what, exc, delay)
            stop.wait(delay)
            delay = min(MAX_DELAY_S, delay * 2)


def committed_offsets(
    consumer: Consumer, partitions: list[TopicPartition], timeout: float, what: str
) -> list[TopicPartition]:
    """``consumer.committed(partitions)``, as one step for ``until_broker_answers``: an answer
    the broker could not give (NOT_COORDINATOR while it restarts, a timeout) is a
    ``BrokerUnavailableError``; a fatal error propagates unchanged. ``what`` names the topic or
    component in the error. The processor, the worker's task consumers and the bridges read their
    committed offsets through this after every assignment or rewind."""
    try:
        return consumer.committed(partitions, timeout=timeout)
    except KafkaException as exc:
        if exc.args[0].fatal():
            raise
        raise BrokerUnavailableError(f"cannot read committed offsets of {what}: {exc}") from exc


def assign_at_committed(
    consumer: Consumer,
    partitions: list[TopicPartition],
    *,
    timeout: float,
    what: str,
    who: str,
    stop: threading.Event,
    log: logging.Logger,
) -> list[TopicPartition]:
    """For an ``on_assign`` callback of a cooperative consumer: read the committed offsets of
    ``partitions`` here (retried while the broker does not answer), then assign the partitions at
    them (``OFFSET_BEGINNING`` where nothing is committed: every engine consumer resets to the
    earliest offset), so that librdkafka sends no committed-offset request of its own.

    Why: librdkafka's own OffsetFetch after an assignment is not retried when the coordinator
    answers it with a request-level ``NOT_COORDINATOR`` (librdkafka #5586, open): the partitions
    stay "pending" for good, and the consumer polls and gets nothing (``make soak``'s worker that
    ran no activity after a 30 s broker pause). A partition assigned at an absolute or
    ``BEGINNING`` offset is started at once, with no query (``rd_kafka_assignment_serve_pending``).

    Returns the offsets as read, with their commit metadata (the worker reads it). Raises
    ``BrokerUnavailableError`` only once ``stop`` is set; the callback then returns without
    assigning and the client assigns the partitions its usual way."""
    committed = until_broker_answers(
        lambda: committed_offsets(consumer, partitions, timeout, what),
        what=f"reading committed offsets of {what}",
        who=who,
        stop=stop,
        log=log,
    )
    consumer.incremental_assign(
        [TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING) for tp in committed]
    )
    return committed
