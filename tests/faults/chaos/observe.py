"""Read what a chaos run left behind: the history and dead-letter topics, and the Redis records
of the activities (see ``workflows``)."""

from __future__ import annotations

import redis

from kadence.topics import Catalogue, KafkaConfig
from tests.integration.invariants import histories, read_topic

from .checker import Observations


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
    dead = [v for _k, v, _p, _o in read_topic(config, Catalogue(config).dlq, "DeadLetter")]
    return Observations(histories=dict(histories(config)), dead_letters=dead, ledger=ledger, attempts=attempts)
