"""``kadence stream WORKFLOW_ID [STREAM]``: follow a workflow's stream (decision 0062), one JSON
line per value, until the workflow closes; over Kafka through the SDK's reader, or through the
gateway's Server-Sent Events when ``KADENCE_GATEWAY_URL`` is set."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from .over_http import Gateway, GatewayError, quote
from .workflows import _handle_command

__all__ = ["stream"]


@click.command()
@click.argument("workflow_id")
@click.argument("name", metavar="[STREAM]", required=False)
@click.option("--after", type=click.IntRange(-1), default=None, help="resume after the value with this id")
@click.pass_obj
def stream(config: Any, workflow_id: str, name: str | None, after: int | None) -> None:
    """Follow WORKFLOW_ID's stream STREAM (every stream of it when left out; over the gateway a
    name is needed) from its current run's start, or after the value whose id is --after: one
    JSON line per value ({"id", "stream", "value", "run_id", "activity_id", "attempt",
    "time"}), until the workflow closes (at once for a closed one that never published)."""
    if isinstance(config, Gateway):
        _over_http(config, workflow_id, name, after)
        return

    async def follow(handle: Any) -> None:
        async for event in handle.stream(name, after=after):
            click.echo(json.dumps(event.to_dict(), default=str))

    try:
        _handle_command(config, workflow_id, None, follow)
    except KeyboardInterrupt:
        pass


def _over_http(gw: Gateway, workflow_id: str, name: str | None, after: int | None) -> None:
    if not name:
        raise click.UsageError("over the gateway (KADENCE_GATEWAY_URL) name the stream: kadence stream ID STREAM")
    path = f"/v1/workflows/{quote(workflow_id)}/streams/{quote(name)}"
    try:
        for event_id, kind, data in gw.events(path, params={"after": after}):
            if kind == "end":
                return
            if kind == "value":
                click.echo(json.dumps({"id": int(event_id or 0), **json.loads(data)}))
    except GatewayError as exc:
        click.echo(f"error: {exc.message}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        pass
