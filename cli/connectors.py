"""``kadence archive ...`` and ``kadence bridges ...``: run the connectors, see their status."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from kadence.connectors.archiver_config import ArchiverConfig
from kadence.topics import KadenceError, KafkaConfig
from kadence.topics.archive import ArchiveStoreConfig
from kadence.topics.settings import click_options, given_options

_F = TypeVar("_F", bound=Callable[..., Any])

__all__ = ["archive", "bridges"]


def _run_blocking(make: Callable[[Any], Any], metrics_port: int | None) -> None:
    """Build a connector (``run()``/``stop()``) with its metrics registry and run it until
    SIGTERM/SIGINT, metrics on loopback when ``metrics_port`` is given; a typed error exits 1."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry()
    try:
        service = make(registry)
    except KadenceError as exc:
        raise click.UsageError(str(exc)) from exc
    if metrics_port is not None:
        start_http_server(metrics_port, addr="127.0.0.1", registry=registry)
    signal.signal(signal.SIGTERM, lambda *_: service.stop())
    signal.signal(signal.SIGINT, lambda *_: service.stop())
    try:
        service.run()
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


def _archiver_config(kafka: KafkaConfig, options: dict[str, Any]) -> ArchiverConfig:
    """The archiver's settings: the options given, then the variables (``ArchiverConfig`` and
    ``ArchiveStoreConfig`` declare both), then the config file's retention, then the defaults."""
    store = ArchiveStoreConfig.from_env(**given_options(ArchiveStoreConfig, options))
    given = given_options(ArchiverConfig, options)
    return ArchiverConfig.from_env(kafka, config_file=options["config_file"], store=store, **given)


def _archive_options(*, sweep: bool) -> Callable[[_F], _F]:
    """The archive commands' options, from the settings' declarations (``--sweep-interval``
    only where the archiver runs), and the retention file."""

    def decorate(f: _F) -> _F:
        f = click.option(
            "--config",
            "config_file",
            type=click.Path(exists=True, dir_okay=False),
            default=None,
            help="TOML file with [retention] default and per-namespace values [env KADENCE_ARCHIVE_CONFIG]",
        )(f)
        f = click_options(ArchiveStoreConfig)(f)
        return click_options(ArchiverConfig, leave_out=frozenset() if sweep else frozenset({"sweep_interval_s"}))(f)

    return decorate


@click.group()
def archive() -> None:
    """Archive closed runs after their retention (Avro files, local directory or S3)."""


@archive.command("run")
@_archive_options(sweep=True)
@click.option(
    "--metrics-port",
    type=int,
    envvar="KADENCE_ARCHIVER_METRICS_PORT",
    default=None,
    help="serve Prometheus metrics on this loopback port [env KADENCE_ARCHIVER_METRICS_PORT]",
)
@click.pass_obj
def archive_run(kafka: KafkaConfig, /, metrics_port: int | None, **options: Any) -> None:
    """Run the archiver of the namespace (until SIGTERM/SIGINT)."""
    from kadence.connectors.archiver import Archiver

    _run_blocking(lambda registry: Archiver(_archiver_config(kafka, options), registry=registry), metrics_port)


@archive.command("status")
@_archive_options(sweep=False)
@click.pass_obj
def archive_status(kafka: KafkaConfig, /, **options: Any) -> None:
    """Runs waiting for their retention, due, held back, and archived so far (JSON)."""
    import redis

    from kadence.connectors.archiver import Archiver

    try:
        archiver = Archiver(_archiver_config(kafka, {**options, "sweep_interval": None}))
        status = archiver.status()
        archiver.close()
    except (KadenceError, redis.RedisError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo(json.dumps(status, indent=2))


@click.group()
def bridges() -> None:
    """Inbound bridges: domain topics mapped to workflow starts and signals."""


@bridges.command("run")
@click.option(
    "--config",
    "config_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="TOML file with [bridge] and [[mappings]] (see docs/bridges.md)",
)
@click.option(
    "--metrics-port",
    type=int,
    envvar="KADENCE_BRIDGE_METRICS_PORT",
    default=None,
    help="serve Prometheus metrics on this loopback port [env KADENCE_BRIDGE_METRICS_PORT]",
)
@click.pass_obj
def bridges_run(kafka: KafkaConfig, config_file: str, metrics_port: int | None) -> None:
    """Run the bridges of a configuration file (until SIGTERM/SIGINT)."""
    from kadence.connectors.bridges import Bridge, load_bridge_config
    from kadence.topics.large_payloads import LargePayloadConfig

    from .codec import current_codec

    codec = current_codec()  # kadence --codec / KADENCE_CODEC: the applications' payload codec
    large = LargePayloadConfig.from_env()  # KADENCE_PAYLOAD_*: where inputs over the threshold go
    _run_blocking(
        lambda registry: Bridge(
            load_bridge_config(config_file, kafka, codec=codec, large_payloads=large), registry=registry
        ),
        metrics_port,
    )
