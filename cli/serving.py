"""Running one worker as a CLI service (``kadence batch worker``, ``kadence schedules worker``):
connect (waiting for the broker), serve until SIGTERM or SIGINT, exit 1 on a ``KadenceError``."""

from __future__ import annotations

import asyncio
import math
import signal
import sys
from collections.abc import Callable
from typing import Any

import click

from kadence.topics import KadenceError, KafkaConfig

from .collector import tune_collector_from_env

__all__ = ["serve_worker"]


def serve_worker(config: KafkaConfig, build: Callable[[Any], Any]) -> None:
    """Run the ``Worker`` that ``build(client)`` returns until SIGTERM or SIGINT."""
    from kadence import Client

    tune_collector_from_env()

    async def run() -> None:
        client = await Client.connect(config=config, wait_for_broker=math.inf)
        worker = build(client)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, worker.shutdown)
        try:
            await worker.run()
        finally:
            await client.close()

    try:
        asyncio.run(run())
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
