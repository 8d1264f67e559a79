"""Concurrency and rate limits as the protocol names them: a limit key ``name=value``, its
``max`` and, for a rate limit, its window ``per_ms`` (the ``ConcurrencyLimit`` record), checked
the same way by the SDK, the gateway and the processor (``processors.concurrency`` holds the
slots and admissions; decisions 0057 and 0058)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kadence.schemas.records import ConcurrencyLimit, ConcurrencySlot

from . import serde
from .errors import InvalidArgumentError, SchemaError

__all__ = [
    "COMMAND_KEY_PREFIX",
    "FIRST_VERSION",
    "MAX_LIMITS",
    "MAX_RATE",
    "MAX_SLOTS",
    "RATE_FIRST_VERSION",
    "RATE_KEY_PREFIX",
    "check_limits",
    "check_records_writable",
    "check_writable",
    "command_key",
    "describe_limit",
    "limit_key",
    "limit_record",
    "limits_problem",
    "set_max_body",
    "slot_id",
    "sorted_limits",
]

#: limits one run or activity may name
MAX_LIMITS = 8
#: a limit's max may not exceed this
MAX_SLOTS = 1_000_000
#: a rate limit's max (admissions per window) may not exceed this: its owner keeps the times
#: of the latest ``max`` admissions in the key's record (a higher rate: a shorter window)
MAX_RATE = 10_000
#: a rate limit's window: 10 ms to 7 days
MIN_PER_MS, MAX_PER_MS = 10, 7 * 86_400_000
#: the schema version that added concurrency limits
FIRST_VERSION = 17
#: the schema version that added rate limits (``per_ms``)
RATE_FIRST_VERSION = 18
#: the prefix of the key of a limit's commands and record (it decides the owning partition)
COMMAND_KEY_PREFIX = "concurrency:"
#: the same for a rate limit: a key may be both a concurrency and a rate limit, counted apart
RATE_KEY_PREFIX = "rate:"


def limit_key(name: str, value: str) -> str:
    return f"{name}={value}"


def command_key(name: str, value: str, per_ms: int | None = None) -> str:
    """The key of a limit's commands and of its record: it decides the owning partition."""
    return (COMMAND_KEY_PREFIX if per_ms is None else RATE_KEY_PREFIX) + limit_key(name, value)


def limit_record(lim: ConcurrencyLimit) -> ConcurrencyLimit:
    """A limit's record, without what else the mapping holds."""
    return {"name": lim["name"], "value": lim["value"], "max": lim["max"], "per_ms": lim.get("per_ms")}


def sorted_limits(limits: Iterable[ConcurrencyLimit]) -> list[ConcurrencyLimit]:
    """The order limits are acquired in (by key), so that no two holders wait for each other."""
    return sorted((limit_record(lim) for lim in limits), key=slot_id)


def slot_id(lim: ConcurrencyLimit | ConcurrencySlot) -> tuple[str, str, bool]:
    """What tells two limits apart: the key, and whether it is a rate limit."""
    return (lim["name"], lim["value"], lim.get("per_ms") is not None)


def describe_limit(lim: ConcurrencyLimit) -> str:
    """``api=stripe (max 5)`` or ``api=stripe (10 per 1s)``."""
    per = lim.get("per_ms")
    key = limit_key(lim["name"], lim["value"])
    if per is None:
        return f"{key} (max {lim['max']})"
    return f"{key} ({lim['max']} per {per / 1000:g}s)"


def limits_problem(limits: Sequence[ConcurrencyLimit]) -> str | None:
    """Why a list of limits is not valid (None: it is)."""
    if len(limits) > MAX_LIMITS:
        return f"at most {MAX_LIMITS} concurrency limits, not {len(limits)}"
    seen = set()
    for lim in limits:
        name, value, top = lim["name"], lim["value"], lim["max"]
        if not isinstance(name, str) or not name or "=" in name or len(name) > 200:
            return f"concurrency limit name {name!r}: 1-200 characters, no '='"
        if not isinstance(value, str) or not value or len(value) > 1000:
            return f"concurrency limit {name}: its value must have 1-1000 characters"
        if not isinstance(top, int) or isinstance(top, bool) or not 1 <= top <= MAX_SLOTS:
            return f"concurrency limit {name}={value}: max must be an integer 1-{MAX_SLOTS}, not {top!r}"
        per = lim.get("per_ms")
        if per is not None:
            if not isinstance(per, int) or isinstance(per, bool) or not MIN_PER_MS <= per <= MAX_PER_MS:
                return f"rate limit {name}={value}: its window must be {MIN_PER_MS} ms to 7 days, not {per!r} ms"
            if top > MAX_RATE:
                return f"rate limit {name}={value}: at most {MAX_RATE} per window, not {top} (use a shorter window)"
        if slot_id(lim) in seen:
            return f"{'rate' if per is not None else 'concurrency'} limit {name}={value} named twice"
        seen.add(slot_id(lim))
    return None


def check_limits(limits: Sequence[ConcurrencyLimit]) -> list[ConcurrencyLimit]:
    """``limits`` as records, or ``InvalidArgumentError`` saying what is wrong."""
    why = limits_problem(limits)
    if why:
        raise InvalidArgumentError(why)
    return [limit_record(lim) for lim in limits]


def check_writable(what: str, first: int = FIRST_VERSION) -> None:
    """``SchemaError`` when this process writes a schema version older than concurrency limits
    (or rate limits: ``first``) (``KADENCE_SCHEMA_WRITE_VERSION``, a rolling upgrade): the
    pinned writer would leave the limits out, and the run or activity would run unlimited."""
    version = serde.write_version()
    if version < first:
        raise SchemaError(
            f"{what} need schema version {first}; this process writes version {version} "
            f"({serde.WRITE_VERSION_ENV}): lift the pin once every instance is upgraded"
        )


def check_records_writable(records: Sequence[ConcurrencyLimit]) -> None:
    """``check_writable`` for what ``records`` need (nothing when empty)."""
    if records:
        check_writable("concurrency limits")
    if any(r.get("per_ms") is not None for r in records):
        check_writable("rate limits", RATE_FIRST_VERSION)


def set_max_body(
    name: str, value: str, max: int, *, per_ms: int | None = None, identity: str = "", reason: str = ""
) -> tuple[str, ConcurrencySlot]:
    """The command key and ``ConcurrencySlot`` body (kind ``set``) of an operator's max for the
    key ``name=value`` (its rate limit's when ``per_ms`` is given: the window the record keeps
    until a request names one); ``max`` 0 lifts it. ``InvalidArgumentError`` for a bad key, max,
    window or a reason over 500 characters."""
    why = limits_problem([{"name": name, "value": value, "max": max or 1, "per_ms": per_ms}])
    if why is None and (not isinstance(max, int) or isinstance(max, bool) or max < 0):
        why = f"max must be 0 (lift) or more, not {max!r}"
    if why is None and len(reason) > 500:
        why = "the reason may have at most 500 characters"
    if why:
        raise InvalidArgumentError(why)
    check_records_writable([{"name": name, "value": value, "max": max or 1, "per_ms": per_ms}])
    body: ConcurrencySlot = {
        "kind": "set",
        "name": name,
        "value": value,
        "max": max,
        "holder": identity,
        "ticket": "",
        "activity_id": None,
        "requested_ms": 0,
        "message": reason,
        "per_ms": per_ms,
        "not_before_ms": 0,
    }
    return command_key(name, value, per_ms), body
