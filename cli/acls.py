"""``kadence acls``: the Kafka ACLs a component needs (``kadence.topics.acls``), printed as
``kafka-acls.sh`` commands, or created at once with ``--apply`` (as a principal allowed to alter
the cluster's ACLs).

kadence acls processor --principal User:kadence-processor            print the commands
kadence acls processor worker --principal User:svc --apply           create them
"""

from __future__ import annotations

import sys

import click

from kadence.topics import KadenceError, KafkaConfig
from kadence.topics.acls import COMPONENTS

__all__ = ["acls"]


@click.command()
@click.argument("components", nargs=-1, required=True, type=click.Choice(COMPONENTS))
@click.option("--principal", required=True, help="who gets them, as Kafka names it: User:NAME")
@click.option("--apply", "apply_", is_flag=True, help="create them on the cluster now instead of printing commands")
@click.pass_obj
def acls(config: KafkaConfig, components: tuple[str, ...], principal: str, apply_: bool) -> None:
    """The ACLs that COMPONENTS need in this namespace (docs/deploy.md, "ACLs")."""
    from kadence.topics.acls import apply_acls, kafka_acls_commands

    if not principal.startswith("User:") or len(principal) == len("User:"):
        raise click.BadParameter("a principal looks like User:NAME", param_hint="--principal")
    if not apply_:
        click.echo(f"# namespace {config.namespace}: {', '.join(components)} as {principal}")
        click.echo("# admin.properties: how kafka-acls.sh connects, as a principal allowed to alter ACLs")
        for component in components:
            for line in kafka_acls_commands(config.namespace, component, principal):
                click.echo(line)
        return
    try:
        created = apply_acls(config, components, principal)
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo(f"created {created} ACL bindings for {principal} in namespace {config.namespace}")
