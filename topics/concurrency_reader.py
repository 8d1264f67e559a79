"""Concurrency and rate limits as operators see them (``kadence limits``, ``GET /v1/limits``):
each key's max, holders and waiters (a rate limit's admissions in its window and those still to
come), read from ``{ns}.concurrency`` (the latest record of each key, as its owning shard last
committed it; decisions 0057 and 0058)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import KafkaException

from . import serde
from .catalogue import Catalogue
from .concurrency import COMMAND_KEY_PREFIX, RATE_KEY_PREFIX
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


def _view(cs: dict[str, Any], now_ms: int) -> dict[str, Any]:
    per = cs.get("per_ms")
    out = {
        "key": f"{cs['name']}={cs['value']}",
        "kind": "concurrency" if per is None else "rate",
        "name": cs["name"],
        "value": cs["value"],
        "max": cs["max"],
        "per_seconds": None if per is None else per / 1000,
        "in_use": len(cs["holders"]),
        "waiting": len(cs["waiters"]),
        "granted": cs.get("granted", 0),
        "updated": _iso(cs.get("updated_ms") or 0) if cs.get("updated_ms") else None,
        "holders": _entries(cs["holders"]),
        "waiters": _entries(cs["waiters"]),
        "next_admission": None,
    }
    if per is not None:  # admitted in the window that ends now, and admitted for later (delayed)
        recent = cs.get("recent_ms") or []
        out["in_use"] = sum(1 for x in recent if now_ms - per < x <= now_ms)
        out["waiting"] = sum(1 for x in recent if x > now_ms)
        nxt = max(now_ms, recent[-cs["max"]] + per) if len(recent) >= cs["max"] else now_ms
        out["next_admission"] = _iso(nxt)
    return out


def read_limits(config: KafkaConfig) -> list[dict[str, Any]]:
    """Every key ever used in the namespace, by key: ``{key, kind, name, value, max,
    per_seconds, in_use, waiting, granted, updated, holders, waiters, next_admission}`` (holders
    and waiters: ``{workflow_id, activity_id, since}``, waiters first come first). A rate limit
    (``kind`` "rate") holds nothing: its ``in_use`` is what it admitted in the window that ends
    now, ``waiting`` what it admitted for later (delayed), ``next_admission`` when a request now
    would be admitted. None yet: an empty list."""
    topic = Catalogue(config).concurrency
    latest: dict[str, bytes] = {}
    try:
        for msg in scan(config, topic):
            key = msg.key()
            if key is None or not key.startswith((COMMAND_KEY_PREFIX.encode(), RATE_KEY_PREFIX.encode())):
                continue
            if msg.value() is None:
                latest.pop(key.decode(), None)
            else:
                latest[key.decode()] = msg.value()
    except (BrokerUnavailableError, KafkaException, KeyError) as exc:
        if isinstance(exc, KeyError) or "UNKNOWN_TOPIC" in str(exc):
            return []  # no processor made the topic yet: no limit was ever used
        raise
    now_ms = int(time.time() * 1000)
    views = [_view(serde.decode("ConcurrencyState", raw), now_ms) for raw in latest.values()]
    return sorted(views, key=lambda v: (v["key"], v["kind"]))


def describe_limit(config: KafkaConfig, key: str) -> list[dict[str, Any]]:
    """One key (``name=value``) as ``read_limits`` shows it: its concurrency limit, its rate
    limit, or both (a key may be both); empty if it was never used."""
    name, eq, value = key.partition("=")
    if not (eq and name and value):
        raise InvalidArgumentError(f"a limit key is NAME=VALUE, not {key!r}")
    return [lim for lim in read_limits(config) if lim["key"] == key]
