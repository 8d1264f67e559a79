"""``kadence payloads gc``: remove large payloads no history refers to any more
(``kadence.connectors.payload_gc``)."""

from __future__ import annotations

import json

import click

from kadence.topics import KadenceError, KafkaConfig

from .listing import _REL

__all__ = ["payloads"]


def _seconds(text: str) -> float:
    m = _REL.match(text.strip())
    if m is None:
        raise click.BadParameter(f"{text!r}: a duration such as 90s, 15m, 24h or 7d")
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


@click.group()
def payloads() -> None:
    """Large payloads in the payload store (KADENCE_PAYLOAD_DIR or KADENCE_PAYLOAD_S3_*)."""


@payloads.command("gc")
@click.option(
    "--grace",
    default="24h",
    show_default=True,
    help="keep unreferenced payloads younger than this (a command on its way has no history event yet)",
)
@click.option(
    "--all-namespaces",
    is_flag=True,
    help="check every namespace on the broker (a store shared by namespaces needs this)",
)
@click.option("--also-namespace", "also", multiple=True, help="check this namespace too (repeatable)")
@click.option("--dry-run", is_flag=True, help="report what would be deleted, delete nothing")
@click.option("--quiet", is_flag=True, help="no progress line")
@click.pass_obj
def payloads_gc(
    config: KafkaConfig, grace: str, all_namespaces: bool, also: tuple[str, ...], dry_run: bool, quiet: bool
) -> None:
    """Delete the stored payloads that no history, state or archived run of the namespaces refers
    to, once older than the grace period. Prints a JSON report."""
    from rich.console import Console

    from kadence.connectors.payload_gc import collect_payloads, namespaces_on
    from kadence.storage import open_store
    from kadence.topics.archive import ArchiveStoreConfig
    from kadence.topics.large_payloads import LargePayloadConfig

    grace_s = _seconds(grace)
    try:
        large = LargePayloadConfig.from_env()
        if large.store is None:
            raise click.UsageError(
                "no payload store is configured: set KADENCE_PAYLOAD_DIR or KADENCE_PAYLOAD_S3_BUCKET"
            )
        namespaces = set(namespaces_on(config)) if all_namespaces else {config.namespace, *also}
        archive = open_store(ArchiveStoreConfig.from_env())
        console = Console(stderr=True)
        read = [0]

        def progress(n: int) -> None:
            read[0] += n
            if not quiet and read[0] % 50_000 == 0:
                console.print(f"payloads gc: {read[0]:,} records read", highlight=False)

        report = collect_payloads(
            config,
            open_store(large.store),
            namespaces=namespaces,
            archive=archive,
            grace_s=grace_s,
            dry_run=dry_run,
            progress=progress,
        )
    except KadenceError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(json.dumps(report.as_dict(), indent=2))
