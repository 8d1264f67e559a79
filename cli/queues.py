"""``kadence queues``: what waits on each task queue (issue 46: backlog age is a queue's capacity
signal).

kadence queues list              every queue: workflow and activity tasks waiting, oldest ages
kadence queues describe QUEUE    one queue: its builds' workflow tasks and its activity tasks
"""

from __future__ import annotations

import sys

import click

from kadence.topics import KadenceError, KafkaConfig
from kadence.topics.backlog import QUEUE_COLUMNS as COLUMNS
from kadence.topics.backlog import queue_backlogs

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
        rows, builds = queue_backlogs(config, task_queue)
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
