"""``kadence topics``: the namespace's topics.

kadence topics apply [--queue Q]       create what is missing (refuse a partition-count mismatch);
                                       with a schema registry, register the public topics' subjects
kadence topics describe                the namespace's topics and their partition counts
kadence topics asyncapi [-o FILE]      the topic contracts as an AsyncAPI 3 document
"""

from __future__ import annotations

import sys

import click

from kadence.topics import Catalogue, KadenceError, KafkaConfig, PartitionMismatchError
from kadence.topics.schema_registry import COMPATIBILITY, register_topics

from .output import emit_rows, output_option

__all__ = ["topics"]


@click.group()
def topics() -> None:
    """Create and inspect the namespace's topics."""


@topics.command("apply")
@click.option(
    "--partitions",
    type=int,
    envvar="KADENCE_PARTITIONS",
    default=None,
    help="partitions of commands/history/state (fixed for ever) [env KADENCE_PARTITIONS]",
)
@click.option("--queue", "queues", multiple=True, help="also create the task topics of this task queue")
@click.pass_obj
def topics_apply(config: KafkaConfig, partitions: int | None, queues: tuple[str, ...]) -> None:
    """Create what is missing; refuse a partition-count mismatch. With a schema registry
    (KADENCE_SCHEMA_REGISTRY_URL), register every schema version of the public topics' records
    under their subjects, with the BACKWARD_TRANSITIVE rule."""
    if partitions is not None:
        config = KafkaConfig.from_env(bootstrap=config.bootstrap, namespace=config.namespace, partitions=partitions)
    cat = Catalogue(config)
    try:
        specs = cat.core_specs() + [s for q in queues for s in cat.queue_specs(q)]
        report = cat.apply(specs)
        subjects = register_topics(cat, config.schema_registry_url) if config.schema_registry_url else []
    except PartitionMismatchError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    for name in report.created:
        click.echo(f"created  {name}")
    for name in report.existing:
        click.echo(f"exists   {name}")
    for warning in report.warnings:
        click.echo(f"warning  {warning}", err=True)
    for subject in subjects:
        click.echo(f"subject  {subject.subject}  {COMPATIBILITY}, schema IDs {', '.join(map(str, subject.ids))}")


@topics.command("describe")
@output_option
@click.pass_obj
def topics_describe(config: KafkaConfig, output: str) -> None:
    """List the namespace's topics and their partition counts."""
    try:
        have = Catalogue(config).existing()
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    emit_rows([{"topic": name, "partitions": have[name]} for name in sorted(have)], ("topic", "partitions"), output)


@topics.command("asyncapi")
@click.option(
    "--output-file",
    "-o",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="write here, not to stdout",
)
@click.option(
    "--schemas",
    "schemas_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="also write the self-contained schemas a client in another language needs (Command, Reply, "
    "HistoryEvent, VERSION) into this directory",
)
def topics_asyncapi(output_file: str | None, schemas_dir: str | None) -> None:
    """The topic contracts (keys, partitioning, schemas, who writes and reads each topic) as an
    AsyncAPI 3 document (docs/asyncapi.yaml is this command's output). Needs no broker."""
    from pathlib import Path

    from kadence.topics.asyncapi import client_schemas, render

    if schemas_dir is not None:
        Path(schemas_dir).mkdir(parents=True, exist_ok=True)
        for name, text in client_schemas().items():
            (Path(schemas_dir) / name).write_text(text, encoding="utf-8")

    text = render()
    if output_file is None:
        click.echo(text, nl=False)
    else:
        with open(output_file, "w", encoding="utf-8") as f:
            f.write(text)
        click.echo(f"wrote {output_file}", err=True)
