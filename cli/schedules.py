"""``kadence schedules``: create, describe, list, pause, unpause, trigger, backfill and delete
schedules (``kadence.operations.schedules``), and the worker that runs them."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any

import click

from kadence.topics import KafkaConfig

from .connected import run_with_client
from .projections import _REDIS_URL, parse_time_ms
from .serving import serve_worker

__all__ = ["schedules"]


@click.group()
def schedules() -> None:
    """Start workflows on a calendar: cron in a time zone, intervals, overlap policies, backfills."""


def _interval(text: str) -> dict[str, int]:
    """``5m`` or ``1h+15m`` (every hour at a quarter past) -> the interval's fields, in ms."""
    every, _, offset = text.partition("+")
    return {"every_ms": _duration_ms(every, "--every"), "offset_ms": _duration_ms(offset, "--every") if offset else 0}


_CALENDAR_FIELDS = ("second", "minute", "hour", "day_of_month", "month", "day_of_week", "year")


def _calendar(text: str) -> dict[str, str]:
    """``hour=9,day_of_week=MON-FRI`` -> the calendar's fields (a value may hold commas: 1,15)."""
    fields: dict[str, str] = {}
    name = None
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if sep and key.strip() in _CALENDAR_FIELDS:
            name = key.strip()
            fields[name] = value.strip()
        elif name is not None and not sep:  # a list value: day_of_month=1,15
            fields[name] += "," + part.strip()
        else:
            raise click.BadParameter(
                f"{text!r}: use field=value pairs of {', '.join(_CALENDAR_FIELDS)}", param_hint="--calendar"
            )
    return fields


def _duration_ms(text: str, hint: str) -> int:
    units = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    for unit in sorted(units, key=len, reverse=True):
        number = text[: -len(unit)]
        if text.endswith(unit) and number.replace(".", "", 1).isdigit():
            return int(float(number) * units[unit])
    raise click.BadParameter(f"{text!r}: a duration such as 30s, 5m, 1h, 1d", param_hint=hint)


@schedules.command("create")
@click.argument("schedule_id")
@click.option("--workflow", "workflow_type", required=True, help="the workflow type each time starts")
@click.option("--task-queue", required=True, help="its task queue")
@click.option("--input", "inputs", multiple=True, help="an argument, as JSON (repeatable)")
@click.option("--cron", multiple=True, help="a cron expression (five fields or @daily ...; repeatable)")
@click.option("--every", multiple=True, help="an interval: 30s, 5m, 1h+15m (at a quarter past; repeatable)")
@click.option(
    "--calendar",
    "calendars",
    multiple=True,
    help="calendar fields, e.g. hour=9,day_of_week=MON-FRI (second, minute, hour, day_of_month, month, day_of_week, "
    "year; unset: second, minute and hour 0, the others any; repeatable)",
)
@click.option("--limit-actions", type=click.IntRange(0), default=None, help="start at most this many runs in all")
@click.option("--time-zone", default="UTC", show_default=True, help="the IANA zone the cron fields are read in")
@click.option("--jitter", default=None, help="delay each time by up to this much (30s, 5m)")
@click.option("--start-at", default=None, help="no time before this (ISO-8601 or epoch ms)")
@click.option("--end-at", default=None, help="no time after this")
@click.option(
    "--overlap",
    type=click.Choice(["skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all"]),
    default="skip",
    show_default=True,
)
@click.option(
    "--catchup-window", default="365d", show_default=True, help="after an outage, run times missed by at most this"
)
@click.option("--pause-on-failure", is_flag=True, help="pause when a run fails or times out")
@click.option("--workflow-id", default=None, help="the runs' ID prefix (default: the schedule's ID)")
@click.option("--paused", is_flag=True, help="create it paused")
@click.option("--note", default="", help="why (shown by describe)")
@click.pass_obj
def create(config: KafkaConfig, /, schedule_id: str, **o: Any) -> None:
    """Create SCHEDULE_ID."""
    from kadence import ScheduleAction, ScheduleCalendar, ScheduleInterval, SchedulePolicy, ScheduleSpec

    try:
        args = [json.loads(text) for text in o["inputs"]]
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--input") from exc
    spec = ScheduleSpec(
        cron=list(o["cron"]),
        intervals=[ScheduleInterval(**_interval(text)) for text in o["every"]],
        calendars=[ScheduleCalendar(**_calendar(text)) for text in o["calendars"]],
        time_zone=o["time_zone"],
        jitter_ms=_duration_ms(o["jitter"], "--jitter") if o["jitter"] else 0,
        start_at_ms=parse_time_ms(o["start_at"]),
        end_at_ms=parse_time_ms(o["end_at"]),
    )
    action = ScheduleAction(
        workflow_type=o["workflow_type"], task_queue=o["task_queue"], args=args, workflow_id=o["workflow_id"]
    )
    policy = SchedulePolicy(
        overlap=o["overlap"],
        catchup_window_ms=_duration_ms(o["catchup_window"], "--catchup-window"),
        pause_on_failure=o["pause_on_failure"],
    )

    async def work(client: Any) -> None:
        await client.create_schedule(
            schedule_id, spec=spec, action=action.check(), policy=policy, paused=o["paused"], note=o["note"],
            remaining_actions=o["limit_actions"],
        )  # fmt: skip

    run_with_client(config, work)
    click.echo(f"schedule {schedule_id} created", err=True)


@schedules.command("describe")
@click.argument("schedule_id")
@click.pass_obj
def describe(config: KafkaConfig, schedule_id: str) -> None:
    """Its spec, action, policy, state, counts, runs and next times, as JSON."""
    desc = run_with_client(config, lambda client: client.get_schedule_handle(schedule_id).describe())
    click.echo(json.dumps(asdict(desc), indent=2, default=str))


@schedules.command("list")
@_REDIS_URL
@click.pass_obj
def list_schedules(config: KafkaConfig, redis_url: str) -> None:
    """The schedules (from the visibility projection), one ID a line."""
    from kadence.readmodels.visibility import VisibilityFilter, VisibilityReader
    from kadence.topics.schedules import SCHEDULE_ID_PREFIX, SCHEDULE_WORKFLOW_TYPE

    from .listing import _redis

    async def go() -> list[str]:
        redis = _redis(redis_url)
        try:
            reader = VisibilityReader(redis, config.namespace)
            filters = VisibilityFilter(workflow_type=SCHEDULE_WORKFLOW_TYPE, status="running")
            items, cursor = await reader.list(filters, page_size=500)
            while cursor:
                more, cursor = await reader.list(filters, page_size=500, cursor=cursor)
                items += more
            return sorted(i["workflow_id"][len(SCHEDULE_ID_PREFIX) :] for i in items)
        finally:
            await redis.aclose()

    try:
        ids = asyncio.run(go())
    except Exception as exc:  # noqa: BLE001 - Redis unreachable and the like
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    for schedule_id in ids:
        click.echo(schedule_id)


def _change(name: str, help_text: str, call: Callable[[Any, dict[str, Any]], Awaitable[Any]], *options: Any) -> None:
    def command(config: KafkaConfig, /, schedule_id: str, **o: Any) -> None:
        result = run_with_client(config, lambda client: call(client.get_schedule_handle(schedule_id), o))
        click.echo(f"schedule {schedule_id}: {name} done" + ("" if result is None else f" ({result})"), err=True)

    command.__doc__ = help_text
    for option in reversed(options):
        command = option(command)
    schedules.command(name)(click.argument("schedule_id")(click.pass_obj(command)))


_NOTE = click.option("--note", default="", help="why (shown by describe)")
_OVERLAP = click.option(
    "--overlap",
    type=click.Choice(["skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all"]),
    default=None,
    help="instead of the schedule's policy",
)
_change("pause", "Take no action until unpaused.", lambda h, o: h.pause(o["note"]), _NOTE)
_change("unpause", "Take actions again (the paused times do not run).", lambda h, o: h.unpause(o["note"]), _NOTE)
_change("trigger", "Take an action now.", lambda h, o: h.trigger(overlap=o["overlap"]), _OVERLAP)
_change(
    "backfill",
    "Take the actions of the times from --start to --end now.",
    lambda h, o: h.backfill(parse_time_ms(o["start"]), parse_time_ms(o["end"]), overlap=o["overlap"]),
    click.option("--start", required=True, help="ISO-8601, epoch ms, or 2h/7d ago"),
    click.option("--end", required=True, help="ISO-8601, epoch ms, or 2h/7d ago"),
    _OVERLAP,
)
_change("delete", "End the schedule (its runs go on).", lambda h, o: h.delete())


@schedules.command("worker")
@click.pass_obj
def worker(config: KafkaConfig) -> None:
    """Run the schedules (the kadence.Schedule workflow and its activities). Until SIGTERM/SIGINT."""
    from kadence import Worker
    from kadence.operations import Schedule, schedule_activities
    from kadence.topics.schedules import SCHEDULES_TASK_QUEUE

    serve_worker(
        config,
        lambda client: Worker(
            client, task_queue=SCHEDULES_TASK_QUEUE, workflows=[Schedule], activities=schedule_activities(client)
        ),
    )
