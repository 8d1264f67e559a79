"""``kadence verify``: the invariant gaps of a namespace (``kadence.connectors.verify``)."""

from __future__ import annotations

import sys
import time

import click

from kadence.topics import KadenceError, KafkaConfig

from .projections import parse_time_ms

__all__ = ["verify"]


@click.command()
@click.option(
    "--since",
    "since",
    default=None,
    metavar="WHEN",
    help="check only records from then on (30s, 10m, 2h, 7d ago; ISO-8601; epoch ms); skips the state check",
)
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
@click.option("--quiet", is_flag=True, help="no progress bar")
@click.option(
    "--metrics-file",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="also write the result as Prometheus metrics to this file (node_exporter's textfile "
    "collector), replaced atomically; not written when the check could not run",
)
@click.pass_obj
def verify(config: KafkaConfig, since: str | None, as_json: bool, quiet: bool, metrics_file: str | None) -> None:
    """Check a namespace's history, state and replies topics for invariant gaps: duplicate or
    missing event seqs, events after a close, two results of one activity, timers fired twice or
    early, a state that disagrees with its history, an accepted request answered differently.
    Exits 1 when it finds any."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    from kadence.connectors.verify import verify_namespace

    since_ms = parse_time_ms(since)
    try:
        if quiet or as_json:
            report = verify_namespace(config, since_ms=since_ms)
        else:
            with Progress(
                TextColumn("[bold]{task.fields[topic]}"),
                BarColumn(),
                TextColumn("{task.completed:,.0f} records"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
            ) as bar:
                tasks: dict[str, TaskID] = {}

                def show(topic: str, done: int, total: int | None) -> None:
                    if topic not in tasks:
                        tasks[topic] = bar.add_task(topic, total=total, topic=topic)
                    bar.update(tasks[topic], completed=done, total=total)

                report = verify_namespace(config, since_ms=since_ms, progress=show)
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    if as_json:
        click.echo(report.to_json())
    else:
        click.echo(
            f"namespace {report.namespace}: {report.runs:,} runs, {report.events:,} events, "
            f"{report.states:,} states, {report.replies:,} replies"
        )
        for gap in report.gaps:
            click.echo(str(gap))
        for what in report.skipped:
            click.echo(f"skipped: {what}")
        found = {check: n for check, n in report.counts.items() if n}
        click.echo(
            "no invariant gaps" if not found else "gaps: " + ", ".join(f"{check} {n}" for check, n in found.items())
        )
    if metrics_file:
        from prometheus_client import write_to_textfile

        try:
            write_to_textfile(metrics_file, report.to_metrics(time.time()))
        except OSError as exc:
            click.echo(f"error: cannot write {metrics_file}: {exc}", err=True)
            sys.exit(2)
    sys.exit(0 if report.ok else 1)
