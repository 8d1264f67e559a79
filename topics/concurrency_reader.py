"""Concurrency and rate limits as operators see them (``kadence limits``, ``GET /v1/limits``):
each key's max, holders and waiters (a rate limit's admissions in its window and those still to
come), read from ``{ns}.concurrency`` (the latest record of each key, as its owning shard last
committed it; decisions 0057 and 0058)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import KafkaException

from . import serde
from .catalogue import Catalogue
from .concurrency import COMMAND_KEY_PREFIX, RATE_KEY_PREFIX, command_key
from .config import KafkaConfig
from .errors import BrokerUnavailableError, InvalidArgumentError
from .scan import scan

__all__ = ["add_slot_positions", "describe_limit", "limit_view", "read_limits", "waited_keys"]


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def _entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"workflow_id": e["holder"], "activity_id": e.get("activity_id"), "since": _iso(e["since_ms"])} for e in entries
    ]


def limit_view(cs: Mapping[str, Any], now_ms: int) -> dict[str, Any]:
    """A key's record as ``read_limits`` shows it."""
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
        "override": None,
    }
    if cs.get("override_max") is not None:  # an operator's max (kadence limits set)
        out["override"] = {
            "max": cs["override_max"],
            "by": cs.get("override_by", ""),
            "reason": cs.get("override_reason", ""),
            "at": _iso(cs.get("override_ms") or 0),
        }
    if per is not None:  # admitted in the window that ends now, and admitted for later (delayed)
        recent = cs.get("recent_ms") or []
        out["in_use"] = sum(1 for x in recent if now_ms - per < x <= now_ms)
        out["waiting"] = sum(1 for x in recent if x > now_ms)
        nxt = max(now_ms, recent[-cs["max"]] + per) if len(recent) >= cs["max"] else now_ms
        out["next_admission"] = _iso(nxt)
    return out


def read_limits(config: KafkaConfig, keys: list[str] | None = None) -> list[dict[str, Any]]:
    """Every key ever used in the namespace, by key: ``{key, kind, name, value, max,
    per_seconds, in_use, waiting, granted, updated, holders, waiters, next_admission}`` (holders
    and waiters: ``{workflow_id, activity_id, since}``, waiters first come first). A rate limit
    (``kind`` "rate") holds nothing: its ``in_use`` is what it admitted in the window that ends
    now, ``waiting`` what it admitted for later (delayed), ``next_admission`` when a request now
    would be admitted. None yet: an empty list.

    ``keys`` (``NAME=VALUE``): only these keys, read from the partitions that own them alone."""
    catalogue = Catalogue(config)
    topic = catalogue.concurrency
    if topic not in catalogue.existing():
        return []  # no processor made the topic yet: no limit was ever used
    latest: dict[str, bytes] = {}
    wanted = None
    if keys is not None:  # a key may be a concurrency and a rate limit: both records
        pairs = [k.partition("=")[::2] for k in keys]
        wanted = {command_key(name, value, per) for name, value in pairs for per in (None, 1)}
    try:
        for msg in scan(config, topic, for_keys=wanted):
            key = msg.key()
            if key is None or not key.startswith((COMMAND_KEY_PREFIX.encode(), RATE_KEY_PREFIX.encode())):
                continue
            if wanted is not None and key.decode() not in wanted:
                continue
            if msg.value() is None:
                latest.pop(key.decode(), None)
            else:
                latest[key.decode()] = msg.value()
    except KafkaException as exc:
        raise BrokerUnavailableError(f"cannot read {topic}: {exc}") from exc
    now_ms = int(time.time() * 1000)
    views = [limit_view(serde.decode("ConcurrencyState", raw), now_ms) for raw in latest.values()]
    return sorted(views, key=lambda v: (v["key"], v["kind"]))


def describe_limit(config: KafkaConfig, key: str) -> list[dict[str, Any]]:
    """One key (``name=value``) as ``read_limits`` shows it: its concurrency limit, its rate
    limit, or both (a key may be both); empty if it was never used."""
    name, eq, value = key.partition("=")
    if not (eq and name and value):
        raise InvalidArgumentError(f"a limit key is NAME=VALUE, not {key!r}")
    return read_limits(config, [key])


def waited_keys(described: dict[str, Any]) -> list[str]:
    """The concurrency limit keys a described run (``describe.describe_to_json``'s shape), or one
    of its activities, waits for a slot of (for ``add_slot_positions``)."""
    return sorted({d["waiting_for_slot"]["key"] for d, _aid in _waits(described)})


def _waits(described: dict[str, Any]) -> list[tuple[dict[str, Any], str | None]]:
    waits = [(described, None)] + [(a, a["activity_id"]) for a in described.get("pending_activities") or ()]
    return [(d, aid) for d, aid in waits if d.get("waiting_for_slot") and "per_seconds" not in d["waiting_for_slot"]]


def add_slot_positions(described: dict[str, Any], limits: list[dict[str, Any]]) -> None:
    """Tell a described run, and each of its activities, that waits for a concurrency slot where
    it stands: ``in_use``, ``waiting`` and ``waiting_before`` (the requests ahead of it) in its
    ``waiting_for_slot``, and ``reason`` ("waiting for a slot of api=stripe: 5 of 5 in use, 12
    waiting before it"), from ``limits`` (``read_limits`` of its ``waited_keys``). Left as it is
    for a key not there, or a request not among its waiters (on its way, or granted meanwhile)."""
    wf = described["workflow_id"]
    records = {lim["key"]: lim for lim in limits if lim["kind"] == "concurrency"}
    for d, aid in _waits(described):
        slot = d["waiting_for_slot"]
        lim = records.get(slot["key"])
        if lim is None:
            continue
        place = next(
            (i for i, w in enumerate(lim["waiters"]) if w["workflow_id"] == wf and w["activity_id"] == aid), None
        )
        if place is None:
            continue
        slot.update(in_use=lim["in_use"], waiting=lim["waiting"], waiting_before=place)
        slot["reason"] = (
            f"waiting for a slot of {slot['key']}: {lim['in_use']} of {lim['max']} in use, {place} waiting before it"
        )
