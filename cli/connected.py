"""What the client commands over Kafka share: connect a ``Client``, run one piece of work with
it, close it; a typed Kadence error is printed and exits 1 (``kadence schedules``, ``kadence
activity``)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import click

from kadence.topics import KadenceError, KafkaConfig

__all__ = ["run_with_client"]


def run_with_client(config: KafkaConfig, work: Callable[[Any], Awaitable[Any]]) -> Any:
    """``work(client)``'s value, with a client connected for it and closed after."""
    from kadence import Client

    async def go() -> Any:
        client = await Client.connect(config=config)
        try:
            return await work(client)
        finally:
            await client.close()

    try:
        return asyncio.run(go())
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
