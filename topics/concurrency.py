"""Concurrency limits as the protocol names them: a limit key ``name=value`` and its ``max``
(the ``ConcurrencyLimit`` record), checked the same way by the SDK, the gateway and the
processor (``processors.concurrency`` holds the slots; decision 0057)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kadence.schemas.records import ConcurrencyLimit

from . import serde
from .errors import InvalidArgumentError, SchemaError

__all__ = [
    "COMMAND_KEY_PREFIX",
    "FIRST_VERSION",
    "MAX_LIMITS",
    "MAX_SLOTS",
    "check_limits",
    "check_writable",
    "command_key",
    "limit_key",
    "limits_problem",
    "sorted_limits",
]

#: limits one run or activity may name
MAX_LIMITS = 8
#: a limit's max may not exceed this
MAX_SLOTS = 1_000_000
#: the schema version that added concurrency limits
FIRST_VERSION = 17
#: the prefix of the key of a limit's commands and record (it decides the owning partition)
COMMAND_KEY_PREFIX = "concurrency:"


def limit_key(name: str, value: str) -> str:
    return f"{name}={value}"


def command_key(name: str, value: str) -> str:
    """The key of a limit's commands and of its record: it decides the owning partition."""
    return COMMAND_KEY_PREFIX + limit_key(name, value)


def sorted_limits(limits: Iterable[ConcurrencyLimit]) -> list[ConcurrencyLimit]:
    """The order limits are acquired in (by key), so that no two holders wait for each other."""
    return sorted(
        ({"name": lim["name"], "value": lim["value"], "max": lim["max"]} for lim in limits),
        key=lambda lim: (lim["name"], lim["value"]),
    )


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
        if (name, value) in seen:
            return f"concurrency limit {name}={value} named twice"
        seen.add((name, value))
    return None


def check_limits(limits: Sequence[ConcurrencyLimit]) -> list[ConcurrencyLimit]:
    """``limits`` as records, or ``InvalidArgumentError`` saying what is wrong."""
    why = limits_problem(limits)
    if why:
        raise InvalidArgumentError(why)
    return [{"name": lim["name"], "value": lim["value"], "max": lim["max"]} for lim in limits]


def check_writable(what: str) -> None:
    """``SchemaError`` when this process writes a schema version older than concurrency limits
    (``KADENCE_SCHEMA_WRITE_VERSION``, a rolling upgrade): the pinned writer would leave the
    limits out, and the run or activity would run unlimited."""
    version = serde.write_version()
    if version < FIRST_VERSION:
        raise SchemaError(
            f"{what} need schema version {FIRST_VERSION}; this process writes version {version} "
            f"({serde.WRITE_VERSION_ENV}): lift the pin once every instance is upgraded"
        )
