"""A schedule's times (``kadence.topics.schedules``) and the cron wall-clock rules under them
(``kadence.topics.cron``): cron fields read in a time zone across both daylight-saving changes,
intervals with offsets, start and end, the fixed jitter, and the run IDs per time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kadence.topics.cron import next_time_ms
from kadence.topics.errors import InvalidArgumentError
from kadence.topics.schedules import (
    ScheduleCalendar,
    ScheduleInterval,
    ScheduleSpec,
    fire_time,
    next_fire,
    schedule_workflow_id,
    scheduled_workflow_id,
)


def ms(*args: int) -> int:
    return int(datetime(*args, tzinfo=UTC).timestamp() * 1000)


def utc(t: int) -> str:
    return datetime.fromtimestamp(t / 1000, UTC).strftime("%m-%d %H:%M")


def times(spec: ScheduleSpec, after: int, n: int) -> list[str]:
    out = []
    for _ in range(n):
        after = next_fire(spec, after)
        out.append(utc(after))
    return out


def test_a_daily_time_in_a_zone_keeps_its_wall_clock_across_both_changes():
    spec = ScheduleSpec(cron=["30 2 * * *"], time_zone="Europe/Berlin").check()
    # spring forward (28 March 2027): 02:30 does not exist and fires at 03:30 CEST
    assert times(spec, ms(2027, 3, 27, 12), 3) == ["03-28 01:30", "03-29 00:30", "03-30 00:30"]
    # fall back (31 October 2027): 02:30 occurs twice and fires once; the next day 02:30 CET
    # (croniter alone, given aware times, gave 03:30 CET on 1 November)
    assert times(spec, ms(2027, 10, 30, 12), 3) == ["10-31 00:30", "11-01 01:30", "11-02 01:30"]


def test_a_sub_hourly_cron_keeps_its_pace_through_the_repeated_hour():
    spec = ScheduleSpec(cron=["*/20 * * * *"], time_zone="Europe/Berlin").check()
    assert times(spec, ms(2027, 10, 31, 0, 10), 8) == [
        "10-31 00:20",
        "10-31 00:40",  # 02:40 CEST
        "10-31 01:00",  # 02:00 CET, the hour again
        "10-31 01:20",
        "10-31 01:40",
        "10-31 02:00",  # 03:00 CET
        "10-31 02:20",
        "10-31 02:40",
    ]
    # and the cron_schedule of a start follows the same rules
    assert utc(next_time_ms("CRON_TZ=Europe/Berlin 30 2 * * *", ms(2027, 10, 31, 12))) == "11-01 01:30"


def test_intervals_with_offsets_start_and_end():
    spec = ScheduleSpec(
        intervals=[ScheduleInterval(every_ms=3_600_000, offset_ms=15 * 60_000)],
        cron=["0 12 * * *"],
        start_at_ms=ms(2027, 1, 1, 10),
        end_at_ms=ms(2027, 1, 1, 13, 15),
    ).check()
    assert times(spec, ms(2026, 12, 31), 5)[:4] == ["01-01 10:15", "01-01 11:15", "01-01 12:00", "01-01 12:15"]
    assert next_fire(spec, ms(2027, 1, 1, 13, 15)) is None  # ended


def test_jitter_is_fixed_per_schedule_and_time_and_within_its_bound():
    spec = ScheduleSpec(intervals=[ScheduleInterval(every_ms=60_000)], jitter_ms=30_000)
    t = ms(2027, 1, 1)
    delays = [fire_time(spec, "kadence-schedule:a", t + i * 60_000) - (t + i * 60_000) for i in range(50)]
    assert all(0 <= d <= 30_000 for d in delays) and len(set(delays)) > 40
    assert delays == [fire_time(spec, "kadence-schedule:a", t + i * 60_000) - (t + i * 60_000) for i in range(50)]
    assert fire_time(spec, "kadence-schedule:b", t) != fire_time(spec, "kadence-schedule:a", t) or delays[0] == 0


def test_run_ids_name_their_time_and_schedule_ids_are_checked():
    assert scheduled_workflow_id("nightly", ms(2027, 1, 2, 3, 4, 5)) == "nightly-2027-01-02T03:04:05Z"
    assert scheduled_workflow_id("n", ms(2027, 1, 2, 3, 4, 5) + 7) == "n-2027-01-02T03:04:05.007Z"
    assert schedule_workflow_id("nightly") == "kadence-schedule:nightly"
    with pytest.raises(InvalidArgumentError, match="schedule ID"):
        schedule_workflow_id("bad\nid")
    with pytest.raises(InvalidArgumentError, match="schedule ID"):
        schedule_workflow_id("")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (ScheduleSpec(), "at least one cron expression, calendar or interval"),
        (ScheduleSpec(calendars=[ScheduleCalendar(hour="25")]), "does not parse"),
        (ScheduleSpec(calendars=[ScheduleCalendar(day_of_week="MON FRI")]), "one cron field"),
        (ScheduleSpec(cron=["* * *"]), "not five fields"),
        (ScheduleSpec(cron=["CRON_TZ=UTC 0 * * * *"]), "give the zone as time_zone"),
        (ScheduleSpec(cron=["@every 5m"]), "give the zone as time_zone and periods as intervals"),
        (ScheduleSpec(cron=["@sometimes"]), "not five fields"),
        (ScheduleSpec(cron=["@daily"], time_zone="Europe/Nowhere"), "unknown time zone"),
        (ScheduleSpec(intervals=[ScheduleInterval(every_ms=10)]), "at least 1000 ms"),
        (ScheduleSpec(intervals=[ScheduleInterval(every_ms=60_000, offset_ms=60_000)]), "offset"),
        (ScheduleSpec(cron=["@daily"], start_at_ms=10, end_at_ms=5), "ends before it starts"),
        (ScheduleSpec(cron=["@daily"], jitter_ms=-1), "jitter"),
    ],
)
def test_a_bad_spec_is_refused_with_the_field_named(spec, message):
    with pytest.raises(InvalidArgumentError, match=message) as info:
        spec.check()
    assert info.value.field and info.value.field.startswith("spec")


def test_calendars_name_times_down_to_the_second_in_the_zone_and_end_with_their_years():
    weekdays = ScheduleSpec(calendars=[ScheduleCalendar(hour="9", day_of_week="MON-FRI")], time_zone="Europe/Paris")
    # Saturday 5 December 2026 at noon UTC: the next three are Monday to Wednesday, 09:00 in Paris
    assert times(weekdays.check(), ms(2026, 12, 5, 12), 3) == ["12-07 08:00", "12-08 08:00", "12-09 08:00"]
    quarters = ScheduleSpec(calendars=[ScheduleCalendar(second="30", minute="*/15", hour="9-17", year="2026")])
    after = next_fire(quarters.check(), ms(2026, 12, 31, 17, 40))
    assert after == ms(2026, 12, 31, 17, 45, 30)  # to the second
    assert next_fire(quarters, after) is None  # 2026 is over: the calendar has ended
    both = ScheduleSpec(cron=["0 12 * * *"], calendars=[ScheduleCalendar(hour="6")]).check()
    assert times(both, ms(2026, 12, 5, 0), 3) == ["12-05 06:00", "12-05 12:00", "12-06 06:00"]  # the union
    assert ScheduleCalendar(minute="30", hour="9").expression() == "30 9 * * * 0 *"


def test_the_cli_reads_a_calendar_as_field_value_pairs():
    import click

    from kadence.cli.schedules import _calendar

    assert _calendar("hour=9,day_of_week=MON-FRI") == {"hour": "9", "day_of_week": "MON-FRI"}
    assert _calendar("day_of_month=1,15,hour=6") == {"day_of_month": "1,15", "hour": "6"}  # a list value
    with pytest.raises(click.BadParameter, match="field=value"):
        _calendar("weekday=MON")
