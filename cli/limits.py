"""``kadence limits``: concurrency and rate limits (decisions 0057 and 0058), as their owning
shards last committed them.

kadence limits list              every key used: its max, slots in use (admitted in the window), waiting
kadence limits describe KEY      one key (NAME=VALUE): who holds its slots and who waits, in order
"""

from __future__ import annotations

import json
import sys

import click

from kadence.topics import KadenceError, KafkaConfig
from kadence.topics.concurrency_reader import describe_limit, read_limits

from .output import emit_rows, output_option

__all__ = ["limits"]

COLUMNS = ("key", "kind", "max", "per_seconds", "in_use", "waiting", "granted", "updated")
ENTRY_COLUMNS = ("position", "workflow_id", "activity_id", "since")


@click.group()
def limits() -> None:
    """Concurrency and rate limits: the slots of each key in use, and the runs and activities waiting."""


@limits.command("list")
@output_option
@click.pass_obj
def list_limits(config: KafkaConfig, output: str) -> None:
    """Every limit key used in the namespace (a rate limit's in_use: admitted in its window)."""
    try:
        rows = read_limits(config)
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    emit_rows([{k: v for k, v in row.items() if k not in ("holders", "waiters")} for row in rows], COLUMNS, output)


@limits.command("describe")
@click.argument("key", metavar="NAME=VALUE")
@output_option
@click.pass_obj
def describe(config: KafkaConfig, key: str, output: str) -> None:
    """One key: its holders, and its waiters first come first (the position a run waits at)."""
    try:
        found = describe_limit(config, key)
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    if not found:
        click.echo(
            f"error: no run or activity has asked for a slot of {key!r} in namespace {config.namespace!r}", err=True
        )
        sys.exit(1)
    if output == "json":
        click.echo(json.dumps(found, sort_keys=True))  # a list: the key's concurrency limit, rate limit or both
        return
    for lim in found:
        if lim["kind"] == "rate":
            click.echo(
                f"{lim['key']}: rate limit {lim['max']} per {lim['per_seconds']:g}s: {lim['in_use']} admitted in the "
                f"last window, {lim['waiting']} admitted for later; the next at {lim['next_admission']}"
            )
            continue
        click.echo(f"{lim['key']}: {lim['in_use']} of {lim['max']} in use, {lim['waiting']} waiting")
        for title, entries in (("holders", lim["holders"]), ("waiting", lim["waiters"])):
            click.echo(f"\n{title}:")
            emit_rows([{"position": i, **e} for i, e in enumerate(entries, 1)], ENTRY_COLUMNS, output)
