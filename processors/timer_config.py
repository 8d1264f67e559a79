"""The timer service's settings (``TimerConfig``) and its delay tiers (``choose_tier``)."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kadence.topics import settings
from kadence.topics.catalogue import TIMER_TIERS_MS
from kadence.topics.config import KafkaConfig
from kadence.topics.errors import ConfigError
from kadence.topics.settings import session_timeout_setting, setting

__all__ = ["NEAR_TIER", "TIERS_ASC", "TimerConfig", "choose_tier"]

#: tiers from the finest to the coarsest
TIERS_ASC: tuple[tuple[str, int], ...] = tuple(sorted(TIMER_TIERS_MS.items(), key=lambda kv: kv[1]))
#: the tier that is read eagerly into the in-memory heap
NEAR_TIER = TIERS_ASC[0][0]


def choose_tier(remaining_ms: int) -> str:
    """The delay tier for a timer due in ``remaining_ms``: the largest tier whose delay is at most
    the remaining time, or the smallest tier when the timer is due sooner than that (or overdue)."""
    chosen = NEAR_TIER
    for name, delay in TIERS_ASC:
        if delay > remaining_ms:
            break
        chosen = name
    return chosen


@dataclass(frozen=True, kw_only=True)
class TimerConfig:
    """A timer service's settings: each read from its environment variable by ``from_env`` and
    offered as a ``kadence timers`` option (``topics.settings``)."""

    kafka: KafkaConfig
    instance_id: str = setting(
        default_factory=socket.gethostname,
        env="KADENCE_TIMERS_ID",
        help="stable per instance slot; names the instance's group member and its logs; default: host name",
    )
    session_timeout_ms: int = session_timeout_setting()
    max_batch: int = setting(
        500, env="KADENCE_TIMERS_MAX_BATCH", help="most records taken from the consumer in one step"
    )
    near_capacity: int = setting(
        200_000,
        env="KADENCE_TIMERS_NEAR_CAPACITY",
        help="near-tier timers held in memory before the near partitions are paused (a safety valve "
        "for a backlog; normally the near window holds ~10 s of timers)",
    )
    commit_interval_ms: int = setting(
        500, env="KADENCE_TIMERS_COMMIT_INTERVAL_MS", help="how often acknowledged progress is committed"
    )
    log_interval_s: float = setting(5.0, env="KADENCE_TIMERS_LOG_INTERVAL_S", help="progress line period while busy")
    producer_stall_s: float = setting(
        30.0,
        env="KADENCE_TIMERS_PRODUCER_STALL_S",
        help="seconds an output may wait for its acknowledgement while the broker answers before the "
        "producer is replaced",
    )

    def __post_init__(self) -> None:
        if not self.instance_id or any(c.isspace() for c in self.instance_id):
            raise ConfigError("timer service instance_id must be a non-empty word")
        if self.max_batch < 1:
            raise ConfigError("max_batch must be >= 1")
        if self.near_capacity < 2:
            raise ConfigError("near_capacity must be >= 2")
        if self.commit_interval_ms < 1:
            raise ConfigError("commit_interval_ms must be >= 1")
        if self.producer_stall_s <= 0:
            raise ConfigError("producer_stall_s must be > 0")

    @classmethod
    def from_env(cls, kafka: KafkaConfig, env: Mapping[str, str] | None = None, **overrides: Any) -> TimerConfig:
        """The settings from the environment (``overrides`` win: command-line options, tests)."""
        return settings.from_env(cls, env, kafka=kafka, **overrides)
