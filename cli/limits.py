"""``kadence limits``: concurrency and rate limits (decisions 0057 and 0058), as their owning
shards last committed them.

kadence limits list              every key used: its max, slots in use (admitted in the window), waiting
kadence limits describe KEY      one key (NAME=VALUE): who holds its slots and who waits, in order
kadence limits set KEY --max N   an operator's max for the key, instead of the one the requests name
kadence limits lift KEY          the requests' max applies again
"""

from __future__ import annotations

import json
import sys

import click

from kadence.topics import InvalidArgumentError, KadenceError, KafkaConfig
from kadence.topics.concurrency_reader import describe_limit, read_limits

from .output import emit_rows, output_option
from .periods import period_ms

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
        if lim["override"]:
            o = lim["override"]
            click.echo(
                f"max {o['max']} set by {o['by'] or '?'} at {o['at']}" + (f": {o['reason']}" if o["reason"] else "")
            )
        for title, entries in (("holders", lim["holders"]), ("waiting", lim["waiters"])):
            click.echo(f"\n{title}:")
            emit_rows([{"position": i, **e} for i, e in enumerate(entries, 1)], ENTRY_COLUMNS, output)


def _per_ms(_ctx: click.Context, _param: click.Parameter, text: str | None) -> int | None:
    if text is None:
        return None
    ms = period_ms(text)
    if ms is None:
        raise click.BadParameter(f"{text!r}: write NUMBER+UNIT (500ms, 1s, 1m, 1h, 1d)", param_hint="--per")
    return ms


def _set(config: KafkaConfig, key: str, top: int, per_ms: int | None, reason: str, identity: str) -> None:
    import asyncio
    from datetime import timedelta

    from kadence import Client

    name, eq, value = key.partition("=")
    if not (eq and name and value):
        click.echo(f"error: a limit key is NAME=VALUE, not {key!r}", err=True)
        sys.exit(2)

    async def run() -> str:
        async with await Client.connect(config=config) as client:
            per = None if per_ms is None else timedelta(milliseconds=per_ms)
            return await client.set_limit_max(name, value, top, per=per, reason=reason, identity=identity)

    try:
        click.echo(asyncio.run(run()))
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2 if isinstance(exc, InvalidArgumentError) else 1)


_per_option = click.option(
    "--per", callback=_per_ms, default=None, metavar="PERIOD", help="the key's rate limit (its window: 1s, 1m, ...)"
)


@limits.command("set")
@click.argument("key", metavar="NAME=VALUE")
@click.option("--max", "top", type=click.IntRange(min=1), required=True, help="the max that applies from now on")
@_per_option
@click.option("--reason", default="", help="why (kept with the key's record, logged as an audit line)")
@click.option("--identity", default="cli", show_default=True, help="who sets it")
@click.pass_obj
def set_max(config: KafkaConfig, key: str, top: int, per: int | None, reason: str, identity: str) -> None:
    """An operator's max for KEY (with --per, for its rate limit): it applies instead of the max
    the starts and activities name, at once (a higher max admits waiters), until lifted."""
    _set(config, key, top, per, reason, identity)


@limits.command("lift")
@click.argument("key", metavar="NAME=VALUE")
@_per_option
@click.option("--reason", default="", help="why (kept with the key's record)")
@click.option("--identity", default="cli", show_default=True, help="who lifts it")
@click.pass_obj
def lift(config: KafkaConfig, key: str, per: int | None, reason: str, identity: str) -> None:
    """Lift the operator's max of KEY: the max the requests name applies again."""
    _set(config, key, 0, per, reason, identity)
