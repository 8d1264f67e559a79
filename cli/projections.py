"""``kadence projections run|rebuild|lag`` and ``kadence list`` (reads the visibility projection)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import click
from rich.progress import ProgressColumn
from rich.text import Text

from kadence.readmodels.keys import PROJECTIONS
from kadence.topics import ConfigError, KadenceError, KafkaConfig

from .health import metrics_host_option
from .listing import _REDIS_URL_DEFAULT, _fail, _redis, parse_time_ms

__all__ = ["EXIT_CONFIG", "parse_time_ms", "projections"]

#: ``kadence projections run``'s status for a setting to fix (``EX_CONFIG``): a refused login, a
#: missing ACL, a TLS file that does not load; its supervisor does not start it again
EXIT_CONFIG = 78

_REDIS_URL = click.option(
    "--redis-url",
    envvar="KADENCE_REDIS_URL",
    default=_REDIS_URL_DEFAULT,
    show_default=True,
    help="Redis of the projections [env KADENCE_REDIS_URL]",
)


def _offsets_text(completed: float, total: float | None) -> str:
    """``12,000/40,000 offsets``; the total is ``?`` until the rebuild has read the end offsets."""
    return f"{completed:,.0f}/{'?' if total is None else format(total, ',.0f')} offsets"


class OffsetsColumn(ProgressColumn):
    """Position and target of a rebuild (rich's TextColumn cannot format a total of None:
    ``kadence projections rebuild`` crashed before its first progress report)."""

    def render(self, task: Any) -> Text:
        return Text(_offsets_text(task.completed, task.total))


@click.group()
def projections() -> None:
    """Run, rebuild and watch the Redis projections (visibility, history read model)."""


@projections.command("run")
@_REDIS_URL
@click.option(
    "--instance-id",
    envvar="KADENCE_PROJECTION_ID",
    default=None,
    help="stable ID of this instance slot [env KADENCE_PROJECTION_ID]; default: host name",
)
@click.option(
    "--metrics-port",
    type=int,
    envvar="KADENCE_PROJECTION_METRICS_PORT",
    default=None,
    help="serve /metrics, /healthz and /readyz on this port [env KADENCE_PROJECTION_METRICS_PORT]",
)
@metrics_host_option
@click.option(
    "--supervise/--no-supervise",
    default=True,
    show_default=True,
    envvar="KADENCE_PROJECTION_SUPERVISE",
    help="run the Faust app in a child process and start it again when it crashes [env KADENCE_PROJECTION_SUPERVISE]",
)
@click.pass_obj
def projections_run(
    config: KafkaConfig,
    redis_url: str,
    instance_id: str | None,
    metrics_port: int | None,
    metrics_host: str,
    supervise: bool,
) -> None:
    """Keep the projections up to date from the history topic (until SIGTERM/SIGINT)."""
    import logging
    import threading

    from prometheus_client import CollectorRegistry

    from kadence.connectors.projection_app import ProjectionConfig, run_projections

    from .health import serve_health

    overrides: dict[str, Any] = {"redis_url": redis_url}
    if instance_id:
        overrides["instance_id"] = instance_id
    try:
        pconf = ProjectionConfig.from_env(config, **overrides)
    except KadenceError as exc:
        _fail(exc)  # before any child: a bad setting is an error, not a restart loop
    if supervise:
        _supervise_projections()
        return
    registry = CollectorRegistry()
    started = threading.Event()  # set once the Faust app runs (the child serves the port: a restart is "not ready")
    if metrics_port is not None:
        serve_health(config, metrics_port, metrics_host, registry, started.is_set)
    level = logging.getLevelName(logging.getLogger().getEffectiveLevel()).lower()
    try:
        run_projections(pconf, registry, loglevel=level, on_started=started.set)
    except ConfigError as exc:  # a refused login, a missing ACL, a TLS file: restarting will not help
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_CONFIG)


def _supervise_projections() -> None:
    """Run this same command with ``--no-supervise`` as a child and start it again whenever it
    exits. Faust ends the whole app when the broker goes away under it (``Conductor: Crashed
    reason=NodeNotReadyError`` in a ``make chaos`` seed's broker restart) and cannot be started
    again in the same process; the projections are idempotent writes into Redis (at-least-once,
    docs/projections.md), so a new app from the committed offsets loses and doubles nothing."""
    import signal
    import threading

    from .supervisor import Supervisor

    supervisor = Supervisor(echo=lambda line: click.echo(line, err=True), final_statuses=frozenset({EXIT_CONFIG}))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    child = supervisor.start("projections app", [sys.executable, "-m", "kadence.cli", *sys.argv[1:], "--no-supervise"])
    try:
        while not stop.wait(0.5):
            if child.given_up:  # a setting to fix: the child said what, exit as it did
                sys.exit(EXIT_CONFIG)
    finally:
        supervisor.stop(timeout=10)


@projections.command("rebuild")
@click.argument("name", required=False, type=click.Choice(PROJECTIONS))
@_REDIS_URL
@click.option("--quiet", is_flag=True, help="no progress bar")
@click.pass_obj
def projections_rebuild(config: KafkaConfig, name: str | None, redis_url: str, quiet: bool) -> None:
    """Replay the history topic from offset 0 into new keys, switch readers over, delete the old
    keys. NAME: one projection (default: all). Reads keep working throughout."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from kadence.connectors.rebuild import rebuild_projections

    names = (name,) if name else PROJECTIONS

    async def go() -> Any:
        redis = _redis(redis_url)
        try:
            if quiet:
                return await rebuild_projections(config, redis, names)
            with Progress(
                TextColumn("[bold]rebuild {task.fields[names]}"),
                BarColumn(),
                OffsetsColumn(),
                TextColumn("{task.fields[rate]:,.0f} events/s"),
                TextColumn("lag {task.fields[lag]:,}"),
                TimeElapsedColumn(),
                transient=False,
            ) as bar:
                task = bar.add_task("rebuild", total=None, names=",".join(names), rate=0.0, lag=0)

                def show(p: dict[str, Any]) -> None:
                    bar.update(
                        task, total=max(p["target"], 1), completed=p["position"], rate=p["events_per_s"], lag=p["lag"]
                    )

                return await rebuild_projections(config, redis, names, on_progress=show)
        finally:
            await redis.aclose()

    try:
        report = asyncio.run(go())
    except KadenceError as exc:
        _fail(exc)
    for n, (old, new) in report.generations.items():
        click.echo(f"{n}: generation {old} -> {new}")
    click.echo(
        f"{report.events} events in {report.seconds:.1f}s ({report.events_per_s:,.0f} events/s); "
        f"{report.deleted_keys} old keys deleted"
    )


@projections.command("lag")
@_REDIS_URL
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_obj
def projections_lag(config: KafkaConfig, redis_url: str, as_json: bool) -> None:
    """The live projection's lag (events, seconds), as last reported by `kadence projections run`."""
    from kadence.readmodels.visibility import projection_lag

    async def go() -> Any:
        redis = _redis(redis_url)
        try:
            return await projection_lag(redis, config.namespace)
        finally:
            await redis.aclose()

    try:
        lag = asyncio.run(go())
    except Exception as exc:  # noqa: BLE001 - Redis unreachable and the like: one line, exit 1
        _fail(exc)
    if as_json:
        click.echo(json.dumps(lag, sort_keys=True))
        return
    if lag["events"] is None:
        click.echo("no projection process has reported for this namespace")
        sys.exit(1)
    state = "running" if lag["running"] else "NOT RUNNING (report is stale)"
    click.echo(f"{state}: lag {lag['events']} events, {lag['seconds']:.3f} s")
    for p, d in sorted(lag["partitions"].items(), key=lambda kv: int(kv[0])):
        click.echo(f"  partition {p}: applied {d['applied']} of {d['high']} ({d['events']} behind)")
