"""Priority and fairness as the protocol names them (the ``Priority`` record; decision 0060):
checked the same way by the SDK, the gateway and the processor, inherited down a run's tree, and
turned into the lane (topic) and the fairness header an activity task is dispatched with.

A priority level is a lane: level 3 (the default) is the queue's activity-task topic, levels 1,
2, 4 and 5 are topics of their own (``Catalogue.activity_lane``), so a task of level 1 is never
behind a backlog of level 5 in one partition. A worker reads every lane and dispatches from them
by weight (``LANE_WEIGHTS``: level 1 gets 16 dispatches for level 5's one while both wait, and
level 5 is never starved). Within a lane, the fairness key of each task (a record header, so the
worker orders tasks without decoding them) shares the lane's dispatches among keys in proportion
to their weights (``sdk._local_backlog``)."""

from __future__ import annotations

import math
from typing import Any

from kadence.schemas.records import Priority

from . import serde
from .errors import InvalidArgumentError, SchemaError
from .identifiers import problem

__all__ = [
    "DEFAULT_LEVEL",
    "FAIRNESS_HEADER",
    "FIRST_VERSION",
    "LANE_WEIGHTS",
    "LEVELS",
    "MAX_FAIRNESS_WEIGHT",
    "WEIGHT_HEADER",
    "check_priority",
    "fairness_headers",
    "fairness_of",
    "inherit",
    "level_of",
    "priority_problem",
    "priority_view",
]

#: the priority levels, first to last
LEVELS = (1, 2, 3, 4, 5)
#: a task with no level (and no inherited one) is dispatched at this one
DEFAULT_LEVEL = 3
#: dispatches per turn of each level while every level has tasks waiting (stride scheduling)
LANE_WEIGHTS = {1: 16, 2: 8, 3: 4, 4: 2, 5: 1}
#: a fairness weight is above 0 and at most this (0 on the wire: unset)
MAX_FAIRNESS_WEIGHT = 1000.0
#: the schema version that added priorities
FIRST_VERSION = 19
#: the activity-task record headers that carry its fairness key and weight (absent: none)
FAIRNESS_HEADER = "kadence-fairness-key"
WEIGHT_HEADER = "kadence-fairness-weight"


def priority_problem(value: object) -> str | None:
    """Why ``value`` (a ``Priority`` record, or None) is not a valid priority (None: it is)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"priority must be a Priority, not {type(value).__name__}"
    level = value.get("priority_key", 0)
    if not isinstance(level, int) or isinstance(level, bool) or not 0 <= level <= len(LEVELS):
        return f"priority_key must be 1 (first) to 5 (last), not {level!r}"
    key = value.get("fairness_key")
    if key is not None:
        why = problem(key, max_length=255, slash=True)
        if why:
            return f"fairness_key {why}"
    weight = value.get("fairness_weight", 0.0)
    if (
        not isinstance(weight, (int, float))
        or isinstance(weight, bool)
        or not math.isfinite(weight)
        or not 0 <= weight <= MAX_FAIRNESS_WEIGHT
    ):
        return f"fairness_weight must be above 0 and at most {MAX_FAIRNESS_WEIGHT:g}, not {weight!r}"
    return None


def check_priority(value: Priority | None) -> Priority | None:
    """``value`` with every field present (None: None, and an all-unset one too);
    ``InvalidArgumentError`` for a bad one; ``SchemaError`` when this process writes a schema
    version older than priorities (a rolling upgrade: the pinned writer would drop it)."""
    why = priority_problem(value)
    if why:
        raise InvalidArgumentError(why)
    if value is None:
        return None
    out: Priority = {
        "priority_key": value.get("priority_key", 0),
        "fairness_key": value.get("fairness_key"),
        "fairness_weight": float(value.get("fairness_weight", 0.0)),
    }
    if not out["priority_key"] and out["fairness_key"] is None and not out["fairness_weight"]:
        return None
    version = serde.write_version()
    if version < FIRST_VERSION:
        raise SchemaError(
            f"a priority needs schema version {FIRST_VERSION}; this process writes version {version} "
            f"({serde.WRITE_VERSION_ENV}): lift the pin once every instance is upgraded"
        )
    return out


def inherit(own: Priority | None, parent: Priority | None) -> Priority | None:
    """``own`` with each unset field taken from ``parent`` (a run's from its parent or previous
    run, an activity's from its run)."""
    if parent is None:
        return own
    if own is None:
        return parent
    return {
        "priority_key": own.get("priority_key", 0) or parent.get("priority_key", 0),
        "fairness_key": own.get("fairness_key") if own.get("fairness_key") is not None else parent.get("fairness_key"),
        "fairness_weight": own.get("fairness_weight", 0.0) or parent.get("fairness_weight", 0.0),
    }


def level_of(priority: Priority | None) -> int:
    """The lane a task of this priority is dispatched on (a level out of range, from a producer
    that bypassed the checks: the default one)."""
    level = (priority or {}).get("priority_key", 0)
    return level if level in LEVELS else DEFAULT_LEVEL


def fairness_headers(priority: Priority | None) -> list[tuple[str, bytes]] | None:
    """The record headers of a task of this priority (None: no fairness key, no headers)."""
    if priority is None or priority.get("fairness_key") is None:
        return None
    headers = [(FAIRNESS_HEADER, str(priority["fairness_key"]).encode())]
    weight = priority.get("fairness_weight", 0.0)
    if weight:
        headers.append((WEIGHT_HEADER, repr(float(weight)).encode()))
    return headers


def fairness_of(headers: list[tuple[str, bytes | None]] | None) -> tuple[bytes, float]:
    """(fairness key, weight) of a task record's headers: ``b""`` and 1.0 without them; a weight
    that does not parse (a record not written by Kadence) counts as 1.0."""
    key, weight = b"", 1.0
    for name, value in headers or ():
        if name == FAIRNESS_HEADER and value is not None:
            key = value
        elif name == WEIGHT_HEADER and value is not None:
            try:
                parsed = float(value)
            except ValueError:
                continue
            if math.isfinite(parsed) and 0 < parsed <= MAX_FAIRNESS_WEIGHT:
                weight = parsed
    return key, weight


def priority_view(priority: Priority | None) -> dict[str, Any] | None:
    """A priority as describe and the gateway show it (levels resolved: 3 when unset)."""
    if priority is None:
        return None
    return {
        "priority_key": level_of(priority),
        "fairness_key": priority.get("fairness_key"),
        "fairness_weight": priority.get("fairness_weight", 0.0) or 1.0,
    }
