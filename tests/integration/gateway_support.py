"""The gateway tests' helpers: the gateway served by uvicorn on a free port, API keys in the dev
stack's Redis, and an HTTP client that checks every answer's error shape. Their fixtures (a
namespace and a history processor per module, a served gateway, a key, a client: ``gw_config``,
``engine``, ``gateway_url``, ``api_key``, ``http``) are in ``conftest.py``."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import socket
import threading
import time

import httpx
import uvicorn

from kadence.topics import Catalogue, KafkaConfig, serde
from kadence.topics.scan import scan


@contextlib.contextmanager
def serve(app):
    """``app`` served by uvicorn in a background thread, on a socket bound before it starts (no race
    for the port); yields the base URL once /healthz answers (after the lifespan connected to Kafka)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="gateway", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert thread.is_alive(), "the gateway exited during startup (see the log above)"
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the gateway did not answer /healthz within 60s"
            time.sleep(0.05)
        yield url
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
    assert not thread.is_alive(), "the gateway did not shut down"


def redis_url() -> str:
    url = os.environ.get("KADENCE_REDIS_URL")
    assert url, "the dev stack provides Redis (KADENCE_REDIS_URL): run under scripts/devstack.py"
    return url


def make_key(namespace: str, url: str | None = None, prefix: str = "kadence:gw:", **kw) -> str:
    """A fresh API key for ``namespace`` in the gateway's Redis (what `kadence keys create` does)."""
    import redis.asyncio as aioredis

    from kadence.gateway import ApiKeyStore

    async def go():
        client = aioredis.from_url(url or redis_url())
        try:
            return (await ApiKeyStore(client, prefix).create(namespace, "test", **kw))[1]
        finally:
            await client.aclose()

    # its own thread: callers may be coroutines, whose loop is running
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, go()).result()


def auth(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


@contextlib.asynccontextmanager
async def checked_client(base_url: str, allowed_5xx: tuple[int, ...] = (), headers: dict | None = None, **kw):
    """An HTTP client that checks every response it receives: no stack trace, never FastAPI's
    default 422 or a 500, and every error in the ``{"error": {"code", "message"}}`` shape."""
    seen: list[httpx.Response] = []

    async def record(response: httpx.Response):
        await response.aread()
        seen.append(response)

    async with httpx.AsyncClient(
        base_url=base_url, timeout=60, event_hooks={"response": [record]}, headers=headers, **kw
    ) as client:
        yield client
    assert seen, "the test made no request"
    for r in seen:
        where = f"{r.request.method} {r.request.url.path} -> {r.status_code}: {r.text[:300]}"
        assert "Traceback" not in r.text and 'File "' not in r.text, where
        assert r.status_code != 422 or r.json()["error"]["code"] == "idempotency_key_reused", where
        assert r.status_code < 500 or r.status_code in allowed_5xx, where
        if r.status_code >= 400:
            err = r.json()["error"]
            assert isinstance(err["code"], str) and err["code"] and isinstance(err["message"], str), where


def commands_for(config: KafkaConfig, workflow_id: str) -> list[str]:
    """Body types of every command produced for ``workflow_id`` in the namespace."""
    codec = serde.codec("Command")
    return [
        codec.decode(m.value())["body"][0]
        for m in scan(config, Catalogue(config).commands)
        if m.key() == workflow_id.encode()
    ]


def devstack():
    """The dev stack's launcher (its RedisServer gives a test a Redis it may stop)."""
    from kadence.devstack import services as module

    return module
