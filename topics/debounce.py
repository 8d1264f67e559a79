"""Debounced starts as the protocol names them (``StartWorkflow.debounce_ms`` and
``debounce_max_ms``; ``processors.debounce`` holds the run; decision 0059), checked the same way
by the SDK, the gateway and the processor."""

from __future__ import annotations

from kadence.schemas.records import StartWorkflow

from . import serde
from .errors import InvalidArgumentError, SchemaError

__all__ = ["FIRST_VERSION", "MAX_DEBOUNCE_MS", "check_debounce", "debounce_problem", "with_debounce"]

#: a debounce (and its cap) may not exceed this
MAX_DEBOUNCE_MS = 7 * 86_400_000
#: the schema version that added debounced starts
FIRST_VERSION = 18


def debounce_problem(debounce_ms: object, max_ms: object, cron_schedule: str | None) -> str | None:
    """Why a start's debounce is not valid (None: it is, or there is none)."""
    for name, value in (("debounce", debounce_ms), ("debounce_max", max_ms)):
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_DEBOUNCE_MS:
            return f"{name} must be 0 to 7 days (in ms), not {value!r}"
    if max_ms and not debounce_ms:
        return "debounce_max needs a debounce"
    if max_ms and max_ms < debounce_ms:  # type: ignore[operator]
        return f"debounce_max ({max_ms} ms) must be at least the debounce ({debounce_ms} ms)"
    if debounce_ms and cron_schedule:
        return "a cron workflow cannot be debounced (its runs start at the schedule's times)"
    return None


def check_debounce(debounce_ms: int, max_ms: int, cron_schedule: str | None) -> None:
    """``InvalidArgumentError`` for a bad debounce; ``SchemaError`` when this process writes a
    schema version older than debounced starts (a rolling upgrade: the pinned writer would
    leave the debounce out, and the start would run at once)."""
    why = debounce_problem(debounce_ms, max_ms, cron_schedule)
    if why:
        raise InvalidArgumentError(why)
    version = serde.write_version()
    if debounce_ms and version < FIRST_VERSION:
        raise SchemaError(
            f"a debounced start needs schema version {FIRST_VERSION}; this process writes version {version} "
            f"({serde.WRITE_VERSION_ENV}): lift the pin once every instance is upgraded"
        )


def with_debounce(body: StartWorkflow, debounce_ms: int, max_ms: int = 0) -> StartWorkflow:
    """``body`` (a ``protocol.start_body``) debounced, checked as ``check_debounce`` does."""
    check_debounce(debounce_ms, max_ms, body.get("cron_schedule"))
    return {**body, "debounce_ms": debounce_ms, "debounce_max_ms": max_ms}
