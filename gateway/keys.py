"""API keys, one namespace each, stored hashed in Redis.

A key reads ``kdn_<key id>_<secret>``: the key ID (public, 12 hex characters) finds the record in
one lookup, the secret is 32 random bytes. Redis holds only the SHA-256 of the whole key, so a
dump of Redis does not give working keys; a 256-bit secret needs no slow hash. Records:

    {prefix}key:<key id>   hash: namespace, name, sha256, created_ms, rate, burst
    {prefix}keys           set of key IDs (for listing)
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from kadence.topics.config import NAMESPACE_RE
from kadence.topics.errors import ConfigError

__all__ = ["ApiKey", "ApiKeyStore", "parse_key"]

_KEY_RE = re.compile(r"^kdn_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")


@dataclass(frozen=True)
class ApiKey:
    """A key's record (never the secret)."""

    key_id: str
    namespace: str
    name: str
    created_ms: int
    #: own token bucket (requests/s, burst); None: the gateway's default per-key limit
    rate: float | None = None
    burst: int | None = None


def parse_key(text: str) -> tuple[str, str] | None:
    """(key id, whole key) of a well-formed key, else None."""
    m = _KEY_RE.match(text or "")
    return (m.group(1), text) if m else None


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiKeyStore:
    """Create, list, revoke and verify keys; ``redis`` is a ``redis.asyncio.Redis``."""

    def __init__(self, redis: Redis, prefix: str = "kadence:gw:") -> None:
        self.redis, self.prefix = redis, prefix

    def _record(self, key_id: str) -> str:
        return f"{self.prefix}key:{key_id}"

    async def create(
        self, namespace: str, name: str = "", *, rate: float | None = None, burst: int | None = None
    ) -> tuple[ApiKey, str]:
        """A new key for ``namespace``: (its record, the key itself, shown once)."""
        if not NAMESPACE_RE.match(namespace):
            raise ConfigError(f"namespace {namespace!r} must match {NAMESPACE_RE.pattern}")
        if rate is None or burst is None:
            if (rate is None) != (burst is None):
                raise ConfigError("give both --rate (>= 0) and --burst (>= 1), or neither")
        elif rate < 0 or burst < 1:
            raise ConfigError("give both --rate (>= 0) and --burst (>= 1), or neither")
        while True:
            key_id = secrets.token_hex(6)
            key = f"kdn_{key_id}_{secrets.token_urlsafe(32)}"
            record = ApiKey(key_id, namespace, name, int(time.time() * 1000), rate, burst)
            fields: dict[Any, str | int | float] = {
                "namespace": namespace,
                "name": name,
                "sha256": _digest(key),
                "created_ms": record.created_ms,
            }
            if rate is not None and burst is not None:
                fields.update(rate=rate, burst=burst)
            # HSETNX on the namespace field claims the ID; a collision (2^-48) draws again
            if await self.redis.hsetnx(self._record(key_id), "namespace", namespace):
                break
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(self._record(key_id), mapping=fields)
            pipe.sadd(f"{self.prefix}keys", key_id)
            await pipe.execute()
        return record, key

    async def list(self, namespace: str | None = None) -> list[ApiKey]:
        ids = sorted(m.decode() if isinstance(m, bytes) else m for m in await self.redis.smembers(f"{self.prefix}keys"))
        out = []
        for key_id in ids:
            found = await self._load(key_id)
            if found is not None and (namespace is None or found[0].namespace == namespace):
                out.append(found[0])
        return sorted(out, key=lambda k: (k.namespace, k.created_ms, k.key_id))

    async def revoke(self, key_id: str) -> ApiKey | None:
        """Delete the key; returns its record, or None when there was no such key."""
        found = await self._load(key_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(self._record(key_id))
            pipe.srem(f"{self.prefix}keys", key_id)
            await pipe.execute()
        return found[0] if found else None

    async def lookup(self, key_id: str) -> tuple[ApiKey, str] | None:
        """(record, stored digest) of a key ID, or None."""
        return await self._load(key_id)

    @staticmethod
    def matches(key: str, digest: str) -> bool:
        return hmac.compare_digest(_digest(key), digest)

    async def _load(self, key_id: str) -> tuple[ApiKey, str] | None:
        raw = await self.redis.hgetall(self._record(key_id))
        if not raw:
            return None
        h = {
            (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in raw.items()
        }
        if "sha256" not in h:  # being created
            return None
        rate = float(h["rate"]) if h.get("rate") else None
        burst = int(h["burst"]) if h.get("burst") else None
        return ApiKey(key_id, h["namespace"], h.get("name", ""), int(h.get("created_ms", 0)), rate, burst), h["sha256"]
