"""The records of a schedule (``kadence.operations.schedules`` runs it; the SDK, the CLI and the
gateway create and change it): when it fires (``ScheduleSpec``), what it starts
(``ScheduleAction``), what it does when runs overlap or times were missed (``SchedulePolicy``),
and the times themselves (``next_fire``). Plain dataclasses, typed on the way in by the SDK's
converter and by FastAPI alike; ``check`` refuses a bad one with an ``InvalidArgumentError``
before anything is sent.

Times are epoch milliseconds. A schedule's *nominal* time is the one its spec names; it fires at
the nominal time plus its jitter, a fixed fraction of ``jitter_ms`` drawn from the schedule's ID
and the time (the same on every replay and every worker). The run it starts has the workflow ID
``{workflow_id}-{nominal time, ISO 8601 UTC}`` (``scheduled_workflow_id``): one ID per scheduled
time, which the schedule's history records starting once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

from .cron import next_local_time_ms
from .errors import InvalidArgumentError
from .identifiers import MAX_ID_LENGTH, MAX_NAME_LENGTH, problem, task_queue_problem

__all__ = [
    "OVERLAP_POLICIES",
    "SCHEDULES_TASK_QUEUE",
    "SCHEDULE_ID_PREFIX",
    "SCHEDULE_WORKFLOW_TYPE",
    "ScheduleAction",
    "ScheduleBackfill",
    "ScheduleCalendar",
    "ScheduleDescription",
    "ScheduleInterval",
    "SchedulePolicy",
    "ScheduleRequest",
    "ScheduleSpec",
    "ScheduleState",
    "ScheduleWaiting",
    "ScheduledRun",
    "fire_time",
    "next_fire",
    "schedule_workflow_id",
    "scheduled_workflow_id",
]

SCHEDULES_TASK_QUEUE = "kadence-schedules"
SCHEDULE_WORKFLOW_TYPE = "kadence.Schedule"
#: a schedule ``nightly`` is the workflow ``kadence-schedule:nightly`` (its own ID space)
SCHEDULE_ID_PREFIX = "kadence-schedule:"
#: what a schedule does with a time that comes while its last run is still running
OVERLAP_POLICIES = ("skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all")
#: a schedule's ID leaves room for the prefix and for its runs' time suffix
MAX_SCHEDULE_ID_LENGTH = MAX_ID_LENGTH - len(SCHEDULE_ID_PREFIX) - 30
_YEAR_MS = 365 * 86_400_000


def _bad(field_name: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(message, field=field_name)


@dataclass
class ScheduleInterval:
    """Every ``every_ms``, at the multiples of it since the Unix epoch shifted by ``offset_ms``
    (``every_ms=3_600_000, offset_ms=900_000``: at a quarter past each hour, UTC)."""

    every_ms: int
    offset_ms: int = 0


#: a calendar's fields in the order of the seven-field cron expression croniter reads
#: (minute hour day-of-month month day-of-week second year)
_CALENDAR_ORDER = ("minute", "hour", "day_of_month", "month", "day_of_week", "second", "year")


@dataclass
class ScheduleCalendar:
    """Times named by calendar fields, as Temporal's structured calendar spec: each field is cron
    syntax for its unit (``"9"``, ``"9-17"``, ``"*/15"``, ``"1,15"``, ``"MON-FRI"``, ``"JAN"``,
    ``"*"``), read on the wall clock of the spec's time zone. Unset fields match as Temporal's do:
    second, minute and hour 0, the others any. ``comment`` is for people.

    ``ScheduleCalendar(hour="9", day_of_week="MON-FRI")``: 09:00:00 on weekdays;
    ``ScheduleCalendar(second="30", minute="*/15", hour="9-17", year="2027")``: every quarter
    hour and a half minute in office hours, in 2027 only."""

    second: str = "0"
    minute: str = "0"
    hour: str = "0"
    day_of_month: str = "*"
    month: str = "*"
    day_of_week: str = "*"
    year: str = "*"
    comment: str = ""

    def expression(self) -> str:
        """The seven-field cron expression of these fields."""
        return " ".join(" ".join(str(getattr(self, name)).split()) or "*" for name in _CALENDAR_ORDER)

    def check(self) -> ScheduleCalendar:
        for name in _CALENDAR_ORDER:
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip() or len(value.split()) != 1:
                raise _bad(f"spec.calendars.{name}", f"a calendar's {name} is one cron field, not {value!r}")
        if not croniter.is_valid(self.expression()):
            raise _bad(
                "spec.calendars",
                f"calendar {self.expression()!r} (minute hour day month weekday second year) does not parse",
            )
        return self


@dataclass
class ScheduleSpec:
    """When a schedule fires: the union of its ``cron`` expressions (five fields or a descriptor
    such as ``@daily``, read in ``time_zone``, an IANA name), its ``calendars`` (calendar fields
    down to the second and the year, ``ScheduleCalendar``) and its ``intervals``, from
    ``start_at_ms`` to ``end_at_ms`` (both optional, inclusive), each time delayed by up to
    ``jitter_ms``."""

    cron: list[str] = field(default_factory=list)
    intervals: list[ScheduleInterval] = field(default_factory=list)
    time_zone: str = "UTC"
    start_at_ms: int | None = None
    end_at_ms: int | None = None
    jitter_ms: int = 0
    calendars: list[ScheduleCalendar] = field(default_factory=list)

    def check(self) -> ScheduleSpec:
        if not self.cron and not self.intervals and not self.calendars:
            raise _bad("spec", "a schedule's spec needs at least one cron expression, calendar or interval")
        for calendar in self.calendars:
            calendar.check()
        try:
            ZoneInfo(self.time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise _bad(
                "spec.time_zone", f"unknown time zone {self.time_zone!r} (an IANA name such as Europe/Paris)"
            ) from None
        for expression in self.cron:
            text = " ".join(str(expression).split())
            if text.startswith(("CRON_TZ=", "TZ=", "@every")):
                raise _bad("spec.cron", f"cron {expression!r}: give the zone as time_zone and periods as intervals")
            if not croniter.is_valid(text) or (not text.startswith("@") and len(text.split(" ")) != 5):
                raise _bad(
                    "spec.cron",
                    f"cron {expression!r} is not five fields (minute hour day-of-month month day-of-week) "
                    "or a descriptor such as @hourly",
                )
        for interval in self.intervals:
            if not isinstance(interval.every_ms, int) or interval.every_ms < 1000:
                raise _bad("spec.intervals", f"an interval is at least 1000 ms, not {interval.every_ms!r}")
            if not isinstance(interval.offset_ms, int) or not 0 <= interval.offset_ms < interval.every_ms:
                raise _bad(
                    "spec.intervals", f"an interval's offset is from 0 to below its period, not {interval.offset_ms!r}"
                )
        if self.start_at_ms is not None and self.end_at_ms is not None and self.end_at_ms < self.start_at_ms:
            raise _bad("spec.end_at_ms", "the spec ends before it starts")
        if not isinstance(self.jitter_ms, int) or self.jitter_ms < 0:
            raise _bad("spec.jitter_ms", f"jitter is a non-negative number of ms, not {self.jitter_ms!r}")
        return self


@dataclass
class ScheduleAction:
    """What each time starts: a run of ``workflow_type`` on ``task_queue`` with ``args``, whose
    workflow ID is ``{workflow_id}-{time}`` (``workflow_id`` is the schedule's ID if None)."""

    workflow_type: str
    task_queue: str
    args: list[Any] = field(default_factory=list)
    workflow_id: str | None = None
    run_timeout_ms: int | None = None

    def check(self) -> ScheduleAction:
        why = problem(self.workflow_type, max_length=MAX_NAME_LENGTH, slash=False)
        if why:
            raise _bad("action.workflow_type", f"the action's workflow type {why}")
        why = task_queue_problem(self.task_queue)
        if why:
            raise _bad("action.task_queue", f"the action's task queue {why}")
        if self.workflow_id is not None:
            why = problem(self.workflow_id, max_length=MAX_SCHEDULE_ID_LENGTH, slash=True)
            if why:
                raise _bad("action.workflow_id", f"the action's workflow ID {why}")
        if self.run_timeout_ms is not None and self.run_timeout_ms <= 0:
            raise _bad("action.run_timeout_ms", "a run timeout is positive")
        return self


@dataclass
class SchedulePolicy:
    """``overlap``: what a time that comes while a run of the schedule is still running does
    (one of ``OVERLAP_POLICIES``; ``skip`` by default, as in Temporal). ``catchup_window_ms``:
    after an outage, times missed by at most this much still fire (in order, by the overlap
    policy); older ones are counted as missed. ``pause_on_failure``: a run that fails or times out
    pauses the schedule."""

    overlap: str = "skip"
    catchup_window_ms: int = _YEAR_MS
    pause_on_failure: bool = False

    def check(self) -> SchedulePolicy:
        if self.overlap not in OVERLAP_POLICIES:
            raise _bad("policy.overlap", f"overlap must be one of {', '.join(OVERLAP_POLICIES)}, not {self.overlap!r}")
        if not isinstance(self.catchup_window_ms, int) or self.catchup_window_ms < 0:
            raise _bad("policy.catchup_window_ms", "the catch-up window is a non-negative number of ms")
        return self


@dataclass
class ScheduleRequest:
    """A schedule as created or updated: spec, action, policy, whether it starts paused (with a
    note that says why), and how many runs it may still start."""

    spec: ScheduleSpec
    action: ScheduleAction
    policy: SchedulePolicy = field(default_factory=SchedulePolicy)
    paused: bool = False
    note: str = ""
    #: limited actions: how many more runs the schedule starts (None: no limit); each run it
    #: starts (for a time, a trigger or a backfill) counts one, and at 0 it takes no time more
    remaining_actions: int | None = None

    def check(self) -> ScheduleRequest:
        self.spec.check()
        self.action.check()
        self.policy.check()
        if self.remaining_actions is not None and (
            not isinstance(self.remaining_actions, int) or self.remaining_actions < 0
        ):
            raise _bad("remaining_actions", f"remaining actions are a count from 0, not {self.remaining_actions!r}")
        return self

    @property
    def exhausted(self) -> bool:
        """Whether its limited actions are used up."""
        return self.remaining_actions is not None and self.remaining_actions <= 0


@dataclass
class ScheduleBackfill:
    """Run the times of the spec from ``start_ms`` to ``end_ms`` (inclusive) now, by ``overlap``
    (the schedule's own policy if None)."""

    start_ms: int
    end_ms: int
    overlap: str | None = None

    def check(self) -> ScheduleBackfill:
        if self.end_ms < self.start_ms:
            raise _bad("end_ms", "a backfill ends before it starts")
        if self.overlap is not None and self.overlap not in OVERLAP_POLICIES:
            raise _bad("overlap", f"overlap must be one of {', '.join(OVERLAP_POLICIES)}, not {self.overlap!r}")
        return self


@dataclass
class ScheduledRun:
    """A run a schedule started (or tried to): for its nominal time, when, and how it ended
    (``running`` until it has; ``start_failed`` if its ID was running already)."""

    nominal_ms: int
    workflow_id: str
    run_id: str | None = None
    started_ms: int | None = None
    status: str = "running"
    message: str = ""
    #: "cancel" or "terminate" while an overlap policy is stopping it
    stopping: str = ""


@dataclass
class ScheduleWaiting:
    """A time whose action waits for the schedule's running runs to end (its overlap policy)."""

    nominal_ms: int
    overlap: str


@dataclass
class ScheduleState:
    """A schedule's whole state: its request, how far its times have been taken, and what it did.
    The workflow's input and what it continues as new with."""

    request: ScheduleRequest
    paused: bool = False
    note: str = ""
    created_ms: int = 0
    #: the last nominal time taken (or skipped, or missed)
    last_nominal_ms: int = 0
    last_trigger_ms: int = 0
    #: runs started
    actions: int = 0
    #: times older than the catch-up window when they were seen (after an outage)
    missed_catchup: int = 0
    #: times the overlap policy skipped
    skipped_overlap: int = 0
    running: list[ScheduledRun] = field(default_factory=list)
    waiting: list[ScheduleWaiting] = field(default_factory=list)
    #: the last runs started or ended, oldest first
    recent: list[ScheduledRun] = field(default_factory=list)

    @classmethod
    def new(cls, request: ScheduleRequest) -> ScheduleState:
        request.check()
        return cls(request=request, paused=request.paused, note=request.note)


@dataclass
class ScheduleDescription:
    """What ``describe`` answers: the state, and the next nominal times (none while paused);
    ``deleted`` once it was deleted (its workflow answers from its final state)."""

    schedule_id: str
    state: ScheduleState
    next_times_ms: list[int] = field(default_factory=list)
    deleted: bool = False


def schedule_workflow_id(schedule_id: str) -> str:
    """The workflow that runs schedule ``schedule_id``; ``InvalidArgumentError`` for a bad ID."""
    why = problem(schedule_id, max_length=MAX_SCHEDULE_ID_LENGTH, slash=True)
    if why:
        raise _bad("schedule_id", f"a schedule ID {why}")
    return SCHEDULE_ID_PREFIX + schedule_id


def scheduled_workflow_id(workflow_id: str, nominal_ms: int) -> str:
    """The workflow ID of the run a schedule starts for its time ``nominal_ms``."""
    stamp = datetime.fromtimestamp(nominal_ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    millis = nominal_ms % 1000
    return f"{workflow_id}-{stamp}{f'.{millis:03d}' if millis else ''}Z"


def _next_calendar_time(calendar: ScheduleCalendar, zone: ZoneInfo, after_ms: int) -> int | None:
    try:
        return next_local_time_ms(calendar.expression(), zone, after_ms)
    except CroniterBadDateError:  # its years are over
        return None


def _next_nominal(spec: ScheduleSpec, after_ms: int) -> int | None:
    zone = ZoneInfo(spec.time_zone)
    candidates = [next_local_time_ms(" ".join(c.split()), zone, after_ms) for c in spec.cron]
    for calendar in spec.calendars:
        at = _next_calendar_time(calendar, zone, after_ms)
        if at is not None:
            candidates.append(at)
    for i in spec.intervals:
        candidates.append((after_ms - i.offset_ms) // i.every_ms * i.every_ms + i.every_ms + i.offset_ms)
    return min(candidates) if candidates else None


def next_fire(spec: ScheduleSpec, after_ms: int) -> int | None:
    """The first nominal time of ``spec`` strictly after ``after_ms``, or None when it has ended."""
    if spec.start_at_ms is not None and after_ms < spec.start_at_ms:
        after_ms = spec.start_at_ms - 1
    nxt = _next_nominal(spec, after_ms)
    if nxt is None or (spec.end_at_ms is not None and nxt > spec.end_at_ms):
        return None
    return nxt


def fire_time(spec: ScheduleSpec, workflow_id: str, nominal_ms: int) -> int:
    """When the nominal time ``nominal_ms`` fires: plus its jitter, the same wherever computed."""
    if not spec.jitter_ms:
        return nominal_ms
    digest = hashlib.blake2b(f"{workflow_id}\x00{nominal_ms}".encode(), digest_size=8).digest()
    return nominal_ms + int.from_bytes(digest, "big") % (spec.jitter_ms + 1)
