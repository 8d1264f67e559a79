"""One engine client per namespace the gateway serves, created on first use.

An ``EngineClient`` holds a producer to ``{ns}.commands`` and a consumer of every partition of
``{ns}.replies`` (from the end, without a consumer group), so every gateway instance sees the
replies to its own commands, whichever instance or process produced the command. Nothing in
here outlives the process: a restarted gateway reconnects and retried requests are answered by
the engine.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from kadence.topics.config import KafkaConfig
from kadence.topics.engine_client import EngineClient
from kadence.topics.errors import BrokerUnavailableError, KadenceError

__all__ = ["EnginePool", "NamespaceUnavailable"]

log = logging.getLogger(__name__)


class NamespaceUnavailable(KadenceError):
    """The namespace's topics cannot be used (missing, or the broker does not answer)."""


class EnginePool:
    def __init__(self, kafka: KafkaConfig, *, preset: dict[str, EngineClient] | None = None) -> None:
        self.kafka = kafka
        self._clients: dict[str, EngineClient] = dict(preset or {})
        self._owned: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}

    def connected(self) -> dict[str, EngineClient]:
        return dict(self._clients)

    async def get(self, namespace: str) -> EngineClient:
        client = self._clients.get(namespace)
        if client is not None:
            return client
        lock = self._locks.setdefault(namespace, asyncio.Lock())
        async with lock:
            client = self._clients.get(namespace)
            if client is None:
                config = dataclasses.replace(self.kafka, namespace=namespace)
                try:
                    client = await asyncio.get_running_loop().run_in_executor(None, EngineClient, config)
                except BrokerUnavailableError:
                    raise
                except KadenceError as exc:
                    raise NamespaceUnavailable(f"namespace {namespace!r} is not ready: {exc}") from exc
                self._clients[namespace] = client
                self._owned.add(namespace)
                log.info("connected to namespace %s", namespace)
        return client

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        for ns in list(self._owned):
            client = self._clients.pop(ns, None)
            if client is not None:
                await loop.run_in_executor(None, client.close)
        self._owned.clear()
