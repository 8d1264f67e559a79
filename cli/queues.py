"""``kadence queues``: what waits on each task queue (issue 46: backlog age is a queue's capacity
signal).

kadence queues list              every queue: workflow and activity tasks waiting, oldest ages, limits
kadence queues describe QUEUE    one queue: its builds' workflow tasks, its activity tasks, its limits
kadence queues set-limit QUEUE   the queue's activity rate limits, across all its workers
kadence queues lift-limit QUEUE  no rate limit on the queue any more
"""

from __future__ import annotations

import sys

import click

from kadence.topics import KadenceError, KafkaConfig
from kadence.topics.backlog import QUEUE_COLUMNS as COLUMNS
from kadence.topics.backlog import queue_backlogs
from kadence.topics.errors import InvalidArgumentError
from kadence.topics.queue_limits import QueueLimit, limit_summary, read_queue_limits, set_queue_limit

from .output import emit_rows, output_option

__all__ = ["queues"]


@click.group()
def queues() -> None:
    """Task queues: the workflow and activity tasks waiting on each, and how long."""


@queues.command("list")
@output_option
@click.pass_obj
def list_queues(config: KafkaConfig, output: str) -> None:
    """Every task queue: tasks waiting for a worker, and the age of the oldest (seconds)."""
    try:
        rows, _builds = queue_backlogs(config)
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    emit_rows(rows, COLUMNS, output)


@queues.command("describe")
@click.argument("task_queue")
@output_option
@click.pass_obj
def describe_queue(config: KafkaConfig, task_queue: str, output: str) -> None:
    """TASK_QUEUE's backlogs: activity tasks, and workflow tasks per build (unversioned included)."""
    try:
        known = read_queue_limits(config)  # once: the rows' summaries and the lines below
        rows, builds = queue_backlogs(config, task_queue, known)
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    if not rows:
        click.echo(f"error: no task queue {task_queue!r} in namespace {config.namespace!r}", err=True)
        sys.exit(1)
    limit = known.get(task_queue)
    shown_limit = limit.describe() if limit is not None and limit.limited else None
    if output == "json":
        emit_rows(rows, COLUMNS, output, extra={"builds": builds, "limits": shown_limit})
        return
    emit_rows(rows, COLUMNS, output)
    if limit is not None and limit.limited:
        click.echo(
            f"\nrate limit: {limit_summary(limit)} (set by {limit.identity or '?'}"
            + (f": {limit.reason}" if limit.reason else "")
            + ")"
        )
    click.echo("")
    shown = [
        {**b, "build_id": b["build_id"] or "(unversioned)", "default": "*" if b["default"] else ""} for b in builds
    ]
    emit_rows(shown, ("build_id", "default", "backlog", "oldest_task_age_s"), output)


def _type_limit(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> dict[str, float]:
    out = {}
    for v in values:
        name, sep, rate = v.rpartition("=")
        try:
            out[name] = float(rate)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise click.BadParameter(f"{v!r}: use TYPE=PER_SECOND, e.g. charge=5")
    return out


def _concurrency_rule(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> dict[str, int]:
    out = {}
    for v in values:
        name, sep, count = v.rpartition("=")
        if not sep or not name or not count.isdigit():
            raise click.BadParameter(f"{v!r}: use TYPE=N (* for every activity), e.g. charge=5")
        out[name] = int(count)
    return out


@queues.command("set-limit")
@click.argument("task_queue")
@click.option("--activities-per-second", "-r", type=float, default=None, help="the whole queue's limit")
@click.option(
    "--activity-type",
    "-t",
    "types",
    multiple=True,
    callback=_type_limit,
    metavar="TYPE=PER_SECOND",
    help="one activity type's own limit (repeatable)",
)
@click.option(
    "--concurrency",
    "-c",
    "concurrency",
    multiple=True,
    callback=_concurrency_rule,
    metavar="TYPE=N",
    help="at most N activities of TYPE (* for all) executing at once, across the namespace (repeatable)",
)
@click.option("--reason", default="", help="why (kept with the limit, shown by describe)")
@click.option("--identity", default="cli", show_default=True, help="who sets it (kept with the limit)")
@click.pass_obj
def set_limit(
    config: KafkaConfig,
    task_queue: str,
    activities_per_second: float | None,
    types: dict[str, float],
    concurrency: dict[str, int],
    reason: str,
    identity: str,
) -> None:
    """Limit how many activities a second TASK_QUEUE's workers start, all together: the whole
    queue (-r) and/or single activity types (-t TYPE=N); and how many execute at once (-c TYPE=N,
    * for all: a concurrency limit each activity scheduled from then on holds). Replaces the
    queue's previous limits; running workers and processors apply it within about a second.
    Tasks beyond it wait."""
    if activities_per_second is None and not types and not concurrency:
        click.echo(
            "error: give --activities-per-second, --activity-type or --concurrency (to lift: kadence queues "
            "lift-limit)",
            err=True,
        )
        sys.exit(2)
    _write(config, task_queue, activities_per_second, types, reason, identity, concurrency)


@queues.command("lift-limit")
@click.argument("task_queue")
@click.option("--reason", default="", help="why (kept with the record)")
@click.option("--identity", default="cli", show_default=True, help="who lifts it (kept with the record)")
@click.pass_obj
def lift_limit(config: KafkaConfig, task_queue: str, reason: str, identity: str) -> None:
    """Lift TASK_QUEUE's rate limits: its workers start tasks as fast as their slots allow."""
    _write(config, task_queue, None, {}, reason, identity, {})


def _write(
    config: KafkaConfig,
    task_queue: str,
    per_second: float | None,
    types: dict[str, float],
    reason: str,
    identity: str,
    concurrency: dict[str, int],
) -> None:
    try:
        QueueLimit(
            task_queue, per_second, types, reason=reason, activity_concurrency=concurrency
        )  # bad: nothing written
        limit = set_queue_limit(
            config,
            task_queue,
            per_second,
            types,
            identity=identity,
            reason=reason,
            activity_concurrency=concurrency,
        )
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2 if isinstance(exc, InvalidArgumentError) else 1)
    click.echo(f"task queue {task_queue}: rate limit {limit_summary(limit)}")
