"""The archiver's settings (``kadence archive``): retention, sweep interval, Redis, and the
archive store's. Apart from ``archiver.py`` so that the CLI can derive its options from them
without importing the archiver's clients (redis alone was about 90 ms of every ``kadence``
command's start-up)."""

from __future__ import annotations

import os
import re
import socket
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kadence.topics import settings
from kadence.topics.archive import ArchiveStoreConfig
from kadence.topics.config import KafkaConfig
from kadence.topics.errors import ConfigError
from kadence.topics.settings import setting

__all__ = ["DEFAULT_RETENTION_S", "ArchiverConfig", "parse_duration", "retention_from_file"]

DEFAULT_RETENTION_S = 7 * 86_400.0
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


def parse_duration(text: str | float | int) -> float:
    """Seconds from ``"7d"``, ``"12h"``, ``"30m"``, ``"10s"``, ``"500ms"`` or a number of seconds."""
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        m = _DURATION.match(text)
        if not m:
            raise ConfigError(f"not a duration: {text!r} (use e.g. 7d, 12h, 30m, 10s, 500ms)")
        seconds = float(m.group(1)) * _UNITS[m.group(2) or "s"]
    if seconds < 0:
        raise ConfigError(f"a duration cannot be negative: {text!r}")
    return seconds


def retention_from_file(path: str, namespace: str) -> float | None:
    """The retention a TOML file gives ``namespace``, or None::

    [retention]
    default = "7d"
    [retention.namespaces]
    orders = "30d"
    """
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read archive config {path}: {exc}") from exc
    section = data.get("retention", {})
    value = section.get("namespaces", {}).get(namespace, section.get("default"))
    return None if value is None else parse_duration(value)


@dataclass(frozen=True, kw_only=True)
class ArchiverConfig:
    kafka: KafkaConfig
    store: ArchiveStoreConfig = field(default_factory=ArchiveStoreConfig)
    redis_url: str = setting(
        "redis://127.0.0.1:6379/0", env="KADENCE_REDIS_URL", help="where the archiver keeps its closed-run index"
    )
    retention_s: float = setting(
        DEFAULT_RETENTION_S,
        env="KADENCE_ARCHIVE_RETENTION",
        help="how long a closed run stays in Kafka (e.g. 7d; default 7d, or the config file's entry)",
        parse=parse_duration,
        option="--retention",
    )
    sweep_interval_s: float = setting(
        5.0,
        env="KADENCE_ARCHIVE_SWEEP_INTERVAL",
        help="how often due runs are archived (default 5s)",
        parse=parse_duration,
        option="--sweep-interval",
    )
    #: most runs archived per sweep step (one Kafka flush per step)
    batch: int = 100
    #: who archived (the PurgeClosedRun command's identity)
    identity: str = field(default_factory=lambda: f"archiver@{socket.gethostname()}-{os.getpid()}")

    def __post_init__(self) -> None:
        if self.retention_s < 0 or self.sweep_interval_s <= 0 or self.batch < 1:
            raise ConfigError("retention must be >= 0, the sweep interval > 0 and the batch >= 1")

    @classmethod
    def from_env(
        cls,
        kafka: KafkaConfig,
        env: Mapping[str, str] | None = None,
        *,
        config_file: str | None = None,
        **overrides: Any,
    ) -> ArchiverConfig:
        """Precedence: explicit overrides (CLI options), then the environment, then the config
        file's entry for the namespace, then the default (7 days)."""
        env = os.environ if env is None else env
        from_file: dict[str, float] = {}
        config_file = config_file or env.get("KADENCE_ARCHIVE_CONFIG")
        if config_file:
            retention = retention_from_file(config_file, kafka.namespace)
            if retention is not None:
                from_file["retention_s"] = retention
        given = {"store": ArchiveStoreConfig.from_env(env), **{k: v for k, v in overrides.items() if v is not None}}
        return settings.from_env(cls, env, defaults=from_file, kafka=kafka, **given)
