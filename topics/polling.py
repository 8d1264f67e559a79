"""Adaptive consumption: wait for one record, then take whatever else is already there."""

from __future__ import annotations

from confluent_kafka import Consumer

__all__ = ["poll_ready"]


def poll_ready(consumer: Consumer, most: int, timeout: float) -> list:
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
