"""``kadence dlq``: dead letters, listed, shown and redriven."""

from __future__ import annotations

import json
import logging
import sys

import click

from kadence.topics import KadenceError, KafkaConfig

from .output import emit_rows, output_option

__all__ = ["dlq"]


@click.group()
def dlq() -> None:
    """Dead letters: records a component could not process."""


@dlq.command("list")
@output_option
@click.pass_obj
def dlq_list(config: KafkaConfig, output: str) -> None:
    """List dead letters: reference, origin, reason, and whether they were redriven."""
    from kadence.topics.dead_letters import list_dead_letters

    rows = []
    for e in list_dead_letters(config):
        row = e.summary()
        del row["key"]
        if output != "json":
            row["reason"] = row["reason"][:120]
        rows.append(row)
    emit_rows(rows, ("ref", "state", "component", "origin", "reason"), output)


@dlq.command("show")
@click.argument("ref")
@click.pass_obj
def dlq_show(config: KafkaConfig, ref: str) -> None:
    """Show one dead letter (REF is partition:offset from `dlq list`)."""
    import base64

    from kadence.topics.dead_letters import list_dead_letters

    found = [e for e in list_dead_letters(config) if e.ref == ref]
    if not found:
        click.echo(f"error: no dead letter {ref}", err=True)
        sys.exit(1)
    r = dict(found[0].record)
    r["key"] = r["key"].decode(errors="replace") if r["key"] else None
    r["value_base64"] = base64.b64encode(r.pop("value") or b"").decode()
    r["redriven"] = found[0].redriven
    click.echo(json.dumps(r, indent=2))


@dlq.command("redrive")
@click.argument("ref")
@click.option(
    "--value-file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="replace the record's value with this file's bytes (a repaired record)",
)
@click.pass_obj
def dlq_redrive(config: KafkaConfig, ref: str, value_file: str | None) -> None:
    """Put a dead letter back on its origin topic, once."""
    from pathlib import Path

    from kadence.topics.dead_letters import redrive

    value = Path(value_file).read_bytes() if value_file else None
    logging.getLogger("kadence.audit").warning("redrive of dead letter %s requested from the CLI", ref)
    try:
        entry = redrive(config, ref, value=value)
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo(f"redriven {ref} to {entry.record['origin_topic']}")
