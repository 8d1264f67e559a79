"""Concurrency limits as operators see them (``kadence limits``, ``GET /v1/limits``): each key's
max, holders and waiters, read from ``{ns}.concurrency`` (the latest record of each key, as its
owning shard last committed it; decision 0057)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from confluent_kafka import KafkaException

from . import serde
from .catalogue import Catalogue
from .concurrency import COMMAND_KEY_PREFIX
from .config import KafkaConfig
from .errors import BrokerUnavailableError, InvalidArgumentError
from .scan import scan

__all__ = ["describe_limit", "read_limits"]


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def _entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"workflow_id": e["holder"], "activity_id": e.get("activity_id"), "since": _iso(e["since_ms"])} for e in entries
    ]


def _view(cs: dict[str, Any]) -> dict[str, Any]:
    return {
        "key": f"{cs['name']}={cs['value']}",
        "name": cs["name"],
        "value": cs["value"],
        "max": cs["max"],
        "in_use": len(cs["holders"]),
        "waiting": len(cs["waiters"]),
        "granted": cs.get("granted", 0),
        "updated": _iso(cs.get("updated_ms") or 0) if cs.get("updated_ms") else None,
        "holders": _entries(cs["holders"]),
        "waiters": _entries(cs["waiters"]),
    }


def read_limits(config: KafkaConfig) -> list[dict[str, Any]]:
    """Every key ever used in the namespace, by key: ``{key, name, value, max, in_use, waiting,
    granted, updated, holders, waiters}`` (holders and waiters: ``{workflow_id, activity_id,
    since}``, waiters first come first). None yet: an empty list."""
    topic = Catalogue(config).concurrency
    latest: dict[str, bytes] = {}
    try:
        for msg in scan(config, topic):
            key = msg.key()
            if key is None or not key.startswith(COMMAND_KEY_PREFIX.encode()):
                continue
            if msg.value() is None:
                latest.pop(key.decode(), None)
            else:
                latest[key.decode()] = msg.value()
    except (BrokerUnavailableError, KafkaException, KeyError) as exc:
        if isinstance(exc, KeyError) or "UNKNOWN_TOPIC" in str(exc):
            return []  # no processor made the topic yet: no limit was ever used
        raise
    return [_view(serde.decode("ConcurrencyState", raw)) for _key, raw in sorted(latest.items())]


def describe_limit(config: KafkaConfig, key: str) -> dict[str, Any] | None:
    """One key (``name=value``) as ``read_limits`` shows it; None if it was never used."""
    name, eq, value = key.partition("=")
    if not (eq and name and value):
        raise InvalidArgumentError(f"a concurrency limit key is NAME=VALUE, not {key!r}")
    return next((lim for lim in read_limits(config) if lim["key"] == key), None)
