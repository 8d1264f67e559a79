"""Cron schedules of cron workflows (``cron_schedule=`` on a start), as Temporal users write them.

A schedule is one of:

* five cron fields, ``minute hour day-of-month month day-of-week`` (``"*/15 * * * *"``,
  ``"0 9 * * MON-FRI"``), parsed by ``croniter``; or a descriptor ``@yearly``, ``@monthly``,
  ``@weekly``, ``@daily``, ``@hourly``;
* ``@every <duration>``: a fixed period of whole seconds, ``"@every 30s"``, ``"@every 1h30m"``
  (units ``d h m s``); its times are the multiples of the period since the Unix epoch, so every
  run of the chain, and every processor that computes them, agrees;
* either, prefixed with ``CRON_TZ=<IANA zone> `` to read the fields in that zone instead of UTC
  (``"CRON_TZ=Europe/Paris 0 9 * * *"``).

``check_cron`` refuses anything else with an ``InvalidArgumentError`` at the call, before
anything is sent; ``next_time_ms`` is the first time of a schedule strictly after a moment.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from .errors import InvalidArgumentError

__all__ = ["check_cron", "next_time_ms"]

_EVERY = re.compile(r"^@every\s+((?:\d+[dhms])+)$")
_UNIT_S = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
_DESCRIPTORS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})


def _bad(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(message, field="cron_schedule")


def _parse(schedule: object) -> tuple[tzinfo, str, int]:
    """(zone, cron expression or "", period in seconds or 0); ``InvalidArgumentError`` if bad."""
    if not isinstance(schedule, str) or not schedule.strip():
        raise _bad(f"cron_schedule is a non-empty str, not {schedule!r:.60}")
    text = " ".join(schedule.split())
    zone: tzinfo = UTC
    if text.startswith(("CRON_TZ=", "TZ=")):
        name, _, text = text.partition(" ")
        try:
            zone = ZoneInfo(name.split("=", 1)[1])
        except (ZoneInfoNotFoundError, ValueError):
            raise _bad(f"cron_schedule {schedule!r}: unknown time zone {name!r}") from None
    every = _EVERY.match(text)
    if every:
        period = sum(int(n) * _UNIT_S[u] for n, u in re.findall(r"(\d+)([dhms])", every.group(1)))
        if period <= 0:
            raise _bad(f"cron_schedule {schedule!r}: the period must be at least 1s")
        return zone, "", period
    if text.startswith("@"):
        if text not in _DESCRIPTORS:
            raise _bad(
                f"cron_schedule {schedule!r}: unknown descriptor (one of {', '.join(sorted(_DESCRIPTORS))}, "
                "or @every <duration>)"
            )
    elif len(text.split(" ")) != 5 or not croniter.is_valid(text):
        raise _bad(
            f"cron_schedule {schedule!r} is not five cron fields (minute hour day-of-month month day-of-week), "
            "a descriptor such as @hourly, or @every <duration>"
        )
    return zone, text, 0


def check_cron(schedule: object) -> str:
    """``schedule`` if it is a valid cron schedule, else ``InvalidArgumentError`` saying why."""
    _parse(schedule)
    assert isinstance(schedule, str)
    return schedule


def next_time_ms(schedule: str, after_ms: int) -> int:
    """The first time of ``schedule`` strictly after ``after_ms`` (epoch milliseconds)."""
    zone, expression, period = _parse(schedule)
    if period:
        period_ms = period * 1000
        return (after_ms // period_ms + 1) * period_ms
    start = datetime.fromtimestamp(after_ms / 1000, tz=UTC).astimezone(zone)
    nxt = croniter(expression, start).get_next(datetime)
    return int(nxt.timestamp() * 1000)
