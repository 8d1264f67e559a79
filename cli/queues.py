"""``kadence queues``: what waits on each task queue (issue 46: backlog age is a queue's capacity
signal).

kadence queues list              every queue: workflow and activity tasks waiting, oldest ages
kadence queues describe QUEUE    one queue: its builds' workflow tasks and its activity tasks
"""

from __future__ import annotations

import sys

import click

from kadence.topics import KadenceError, KafkaConfig

from .output import emit_rows, output_option

__all__ = ["queues"]

COLUMNS = (
    "task_queue",
    "workflow_backlog",
    "workflow_oldest_age_s",
    "activity_backlog",
    "activity_oldest_age_s",
)


def _age(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _older(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def queue_rows(config: KafkaConfig, task_queue: str | None = None) -> tuple[list[dict], list[dict]]:
    """(one row per queue, one row per build of those queues), measured once."""
    from kadence.topics.backlog import BacklogProbe

    probe = BacklogProbe(config)
    try:
        builds = probe.measure(task_queue)
        activities = probe.measure_activities(task_queue)
    finally:
        probe.close()
    rows: dict[str, dict] = {}

    def row(queue: str) -> dict:
        return rows.setdefault(
            queue,
            {c: (queue if c == "task_queue" else 0 if c.endswith("backlog") else None) for c in COLUMNS},
        )

    build_rows = []
    for b in builds:
        r = row(b.task_queue)
        r["workflow_backlog"] += b.backlog
        r["workflow_oldest_age_s"] = _age(_older(r["workflow_oldest_age_s"], b.oldest_age_s))
        build_rows.append(
            {
                "task_queue": b.task_queue,
                "build_id": b.build_id,
                "default": b.is_default,
                "backlog": b.backlog,
                "oldest_task_age_s": _age(b.oldest_age_s),
            }
        )
    for a in activities:
        r = row(a.task_queue)
        r["activity_backlog"] = a.backlog
        r["activity_oldest_age_s"] = _age(a.oldest_age_s)
    return [rows[q] for q in sorted(rows)], build_rows


@click.group()
def queues() -> None:
    """Task queues: the workflow and activity tasks waiting on each, and how long."""


@queues.command("list")
@output_option
@click.pass_obj
def list_queues(config: KafkaConfig, output: str) -> None:
    """Every task queue: tasks waiting for a worker, and the age of the oldest (seconds)."""
    try:
        rows, _builds = queue_rows(config)
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
        rows, builds = queue_rows(config, task_queue)
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    if not rows:
        click.echo(f"error: no task queue {task_queue!r} in namespace {config.namespace!r}", err=True)
        sys.exit(1)
    if output == "json":
        emit_rows(rows, COLUMNS, output, extra={"builds": builds})
        return
    emit_rows(rows, COLUMNS, output)
    click.echo("")
    shown = [
        {**b, "build_id": b["build_id"] or "(unversioned)", "default": "*" if b["default"] else ""} for b in builds
    ]
    emit_rows(shown, ("build_id", "default", "backlog", "oldest_task_age_s"), output)
