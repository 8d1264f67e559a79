"""``kadence archive ...`` and ``kadence bridges ...``: run the connectors, see their status."""

from __future__ import annotations

import json
import signal
import sys

import click

from kadence.topics import KadenceError, KafkaConfig

__all__ = ["archive", "bridges"]


def _run_blocking(make, metrics_port: int | None) -> None:
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


def _archiver_config(kafka: KafkaConfig, options: dict):
    from kadence.connectors.archiver import ArchiverConfig, parse_duration
    from kadence.topics.archive import ArchiveStoreConfig

    store = ArchiveStoreConfig.from_env(
        directory=options["directory"],
        s3_bucket=options["s3_bucket"],
        s3_prefix=options["s3_prefix"],
        s3_endpoint=options["s3_endpoint"],
        s3_region=options["s3_region"],
    )
    overrides = {"store": store, "redis_url": options["redis_url"]}
    if options["retention"] is not None:
        overrides["retention_s"] = parse_duration(options["retention"])
    if options.get("sweep_interval") is not None:
        overrides["sweep_interval_s"] = parse_duration(options["sweep_interval"])
    return ArchiverConfig.from_env(kafka, config_file=options["config_file"], **overrides)


def _archive_options(f):
    for opt in reversed(
        [
            click.option(
                "--retention",
                default=None,
                help="how long closed runs stay in Kafka, e.g. 7d, 12h, 30s [env KADENCE_ARCHIVE_RETENTION; default 7d]",
            ),
            click.option(
                "--config",
                "config_file",
                type=click.Path(exists=True, dir_okay=False),
                default=None,
                help="TOML file with [retention] default and per-namespace values [env KADENCE_ARCHIVE_CONFIG]",
            ),
            click.option("--dir", "directory", default=None, help="local archive directory [env KADENCE_ARCHIVE_DIR]"),
            click.option(
                "--s3-bucket", default=None, help="archive to this S3-compatible bucket [env KADENCE_ARCHIVE_S3_BUCKET]"
            ),
            click.option("--s3-prefix", default=None, help="key prefix in the bucket [env KADENCE_ARCHIVE_S3_PREFIX]"),
            click.option("--s3-endpoint", default=None, help="S3 endpoint URL [env KADENCE_ARCHIVE_S3_ENDPOINT]"),
            click.option("--s3-region", default=None, help="[env KADENCE_ARCHIVE_S3_REGION]"),
            click.option("--redis-url", envvar="KADENCE_REDIS_URL", default=None, help="[env KADENCE_REDIS_URL]"),
        ]
    ):
        f = opt(f)
    return f


@click.group()
def archive() -> None:
    """Archive closed runs after their retention (Avro files, local directory or S3)."""


@archive.command("run")
@_archive_options
@click.option(
    "--sweep-interval",
    default=None,
    help="how often due runs are archived, e.g. 5s [env KADENCE_ARCHIVE_SWEEP_INTERVAL]",
)
@click.option(
    "--metrics-port",
    type=int,
    envvar="KADENCE_ARCHIVER_METRICS_PORT",
    default=None,
    help="serve Prometheus metrics on this loopback port [env KADENCE_ARCHIVER_METRICS_PORT]",
)
@click.pass_obj
def archive_run(kafka: KafkaConfig, metrics_port: int | None, **options) -> None:
    """Run the archiver of the namespace (until SIGTERM/SIGINT)."""
    from kadence.connectors.archiver import Archiver

    _run_blocking(lambda registry: Archiver(_archiver_config(kafka, options), registry=registry), metrics_port)


@archive.command("status")
@_archive_options
@click.pass_obj
def archive_status(kafka: KafkaConfig, **options) -> None:
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

    from .main import current_codec

    codec = current_codec()  # kadence --codec / KADENCE_CODEC: the applications' payload codec
    large = LargePayloadConfig.from_env()  # KADENCE_PAYLOAD_*: where inputs over the threshold go
    _run_blocking(
        lambda registry: Bridge(
            load_bridge_config(config_file, kafka, codec=codec, large_payloads=large), registry=registry
        ),
        metrics_port,
    )
