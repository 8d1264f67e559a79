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
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

from .errors import InvalidArgumentError

__all__ = ["check_cron", "next_local_time_ms", "next_time_ms"]

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
    return next_local_time_ms(expression, zone, after_ms)


def next_local_time_ms(expression: str, zone: tzinfo, after_ms: int) -> int:
    """The first instant strictly after ``after_ms`` at which the wall clock of ``zone`` matches
    the cron ``expression``.

    The fields are matched against the zone's wall time (croniter walks naive local times here:
    given aware ones it fired an hour late after a fall-back change, measured: ``30 2 * * *`` in
    Europe/Berlin gave 03:30 CET on the day after). Across a change of the clocks:

    * a wall time the clocks skip fires as far past the change as it was meant to be after it
      (02:30 on a spring-forward day in Berlin is 03:30 CEST);
    * a wall time that occurs twice when the clocks go back fires once, at its first occurrence,
      unless the hour field is a wildcard (``*``, ``*/n``): then it fires at both, so "every 20
      minutes" keeps its pace through the repeated hour.
    """
    every_hour = expression.split()[1].startswith("*") if not expression.startswith("@") else False
    # an hour back covers the wall times of a repeated hour whose second occurrence is still ahead
    local = datetime.fromtimestamp(after_ms / 1000, tz=UTC).astimezone(zone).replace(tzinfo=None)
    walls = croniter(expression, local - timedelta(hours=2))
    best: int | None = None
    while True:
        try:
            wall: datetime = walls.get_next(datetime)
        except CroniterBadDateError:  # no time after this one (a calendar's last year is over)
            if best is None:
                raise
            return best
        first = int(wall.replace(tzinfo=zone, fold=0).timestamp() * 1000)
        if best is not None and first > best:
            return best  # first occurrences never go back in time, second ones are later still
        second = int(wall.replace(tzinfo=zone, fold=1).timestamp() * 1000)
        for at in (first, second) if every_hour and second > first else (first,):
            if at > after_ms and (best is None or at < best):
                best = at
