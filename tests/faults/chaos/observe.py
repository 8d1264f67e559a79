"""Read what a chaos run left behind: the history and dead-letter topics, and the Redis records
of the activities (see ``workflows``)."""

from __future__ import annotations

import logging
import time

import redis
from confluent_kafka import KafkaException

from kadence import BrokerUnavailableError
from kadence.topics import Catalogue, KafkaConfig
from kadence.topics.streams import entry_from_record
from tests.integration.invariants import histories, read_topic

from .checker import Observations

log = logging.getLogger(__name__)

#: how long the reads of the topics are retried while the broker does not answer
READ_DEADLINE_S = 300.0


def until_read(what: str, read):
    """``read()``, again from the start while the broker does not answer it (a starved broker
    once timed out the metadata request of the first read, 10 s, after the barrier passed)."""
    deadline, pause = time.monotonic() + READ_DEADLINE_S, 1.0
    while True:
        try:
            return read()
        except (KafkaException, BrokerUnavailableError) as exc:
            if time.monotonic() > deadline:
                raise
            log.warning("chaos: reading %s: %s; again in %.0f s", what, exc, pause)
            time.sleep(pause)
            pause = min(pause * 2, 10.0)


def observe(config: KafkaConfig, redis_url: str, prefix: str) -> Observations:
    r = redis.Redis.from_url(redis_url)
    try:
        ledger = [k.decode() for k in r.lrange(f"{prefix}:ledger", 0, -1)]
        attempts = []
        for item in r.lrange(f"{prefix}:attempts", 0, -1):
            key, _, attempt = item.decode().rpartition("|")
            attempts.append((key, int(attempt)))
    finally:
        r.close()
    topics = Catalogue(config)
    dead = [v for _k, v, _p, _o in until_read("dead letters", lambda: read_topic(config, topics.dlq, "DeadLetter"))]
    streams = [
        entry_from_record(offset, value)
        for _k, value, _p, offset in until_read("streams", lambda: read_topic(config, topics.streams, "StreamRecord"))
    ]
    return Observations(
        streams=streams,
        histories=dict(until_read("histories", lambda: histories(config))),
        dead_letters=dead,
        ledger=ledger,
        attempts=attempts,
    )
