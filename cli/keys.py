"""``kadence keys``: API keys of the HTTP gateway (create, list, revoke), stored hashed in Redis.

Every change is written to the ``kadence.audit`` log (key ID and namespace, never the key).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import click

from .output import emit_rows, output_option

__all__ = ["keys"]

audit = logging.getLogger("kadence.audit")


def _run(redis_url: str, prefix: str, action: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run ``action(store)`` against Redis; a Redis or input error exits 1 with its message."""
    import redis.asyncio as aioredis
    from redis.exceptions import RedisError

    from kadence.gateway import ApiKeyStore
    from kadence.topics import KadenceError

    async def go() -> Any:
        client = aioredis.from_url(redis_url, socket_timeout=5, socket_connect_timeout=5)
        try:
            return await action(ApiKeyStore(client, prefix))
        finally:
            await client.aclose()

    try:
        return asyncio.run(go())
    except (RedisError, OSError) as exc:
        click.echo(f"error: Redis at {redis_url.split('@')[-1]} did not answer: {exc}", err=True)
        sys.exit(1)
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


@click.group()
@click.option(
    "--redis-url", envvar="KADENCE_REDIS_URL", required=True, help="Redis of the gateway [env KADENCE_REDIS_URL]"
)
@click.option(
    "--prefix",
    envvar="KADENCE_GATEWAY_REDIS_PREFIX",
    default="kadence:gw:",
    show_default=True,
    help="prefix of the gateway's Redis keys [env KADENCE_GATEWAY_REDIS_PREFIX]",
)
@click.pass_context
def keys(ctx: click.Context, redis_url: str, prefix: str) -> None:
    """API keys of the HTTP gateway, one namespace each."""
    ctx.obj = {"redis_url": redis_url, "prefix": prefix, "kafka": ctx.obj}


@keys.command("create")
@click.option("--namespace", "namespace", required=True, help="the namespace the key may act in")
@click.option("--name", default="", help="what the key is for (shown by `keys list`)")
@click.option("--rate", type=float, default=None, help="own quota: requests per second (with --burst)")
@click.option("--burst", type=int, default=None, help="own quota: largest burst (with --rate)")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_obj
def create(
    obj: dict[str, Any], namespace: str, name: str, rate: float | None, burst: int | None, as_json: bool
) -> None:
    """Create a key and print it once (only its SHA-256 is stored)."""
    record, key = _run(obj["redis_url"], obj["prefix"], lambda s: s.create(namespace, name, rate=rate, burst=burst))
    audit.warning("API key %s created for namespace %s", record.key_id, record.namespace)
    if as_json:
        click.echo(
            json.dumps({"key_id": record.key_id, "namespace": record.namespace, "name": record.name, "key": key})
        )
    else:
        click.echo(
            f"key id     {record.key_id}\nnamespace  {record.namespace}\nkey        {key}\n"
            "(the key is shown only now: store it safely)"
        )


@keys.command("list")
@click.option("--namespace", default=None, help="only this namespace's keys")
@output_option
@click.pass_obj
def list_keys(obj: dict[str, Any], namespace: str | None, output: str) -> None:
    """List keys: ID, namespace, name, creation time, own quota (never the key)."""
    rows = []
    for k in _run(obj["redis_url"], obj["prefix"], lambda s: s.list(namespace)):
        created = datetime.fromtimestamp(k.created_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        quota = f"{k.rate:g}/s burst {k.burst}" if k.rate is not None else "default quota"
        rows.append(
            {"key_id": k.key_id, "namespace": k.namespace, "name": k.name or "-", "created": created, "quota": quota}
        )
    emit_rows(rows, ("key_id", "namespace", "name", "created", "quota"), output)


@keys.command("revoke")
@click.argument("key_id")
@click.pass_obj
def revoke(obj: dict[str, Any], key_id: str) -> None:
    """Revoke a key (gateways stop accepting it within their auth cache time, 5 s by default)."""
    record = _run(obj["redis_url"], obj["prefix"], lambda s: s.revoke(key_id))
    if record is None:
        click.echo(f"error: no key {key_id}", err=True)
        sys.exit(1)
    audit.warning("API key %s of namespace %s revoked", record.key_id, record.namespace)
    click.echo(f"revoked {record.key_id} ({record.namespace})")
