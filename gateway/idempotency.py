"""Idempotency keys: the same key must mean the same request, on every gateway instance.

The answer to a retried request comes from the engine (the key is the command's request ID and the
processor answers a repeated request ID as the first time). What the engine cannot see is a client
reusing a key for a *different* request; so the first use of a key stores a fingerprint of the
request (method, path, canonical JSON body) in Redis with SET NX and a TTL, and a later use with
another fingerprint is refused (422) before any command is produced.
"""

from __future__ import annotations

import hashlib
import json

from redis.asyncio import Redis

__all__ = ["IdempotencyStore", "fingerprint"]


def fingerprint(method: str, path: str, body: bytes) -> str:
    """SHA-256 of the request; bodies that are the same JSON value hash the same."""
    try:
        canonical = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":")).encode() if body else b""
    except ValueError:
        canonical = body
    h = hashlib.sha256()
    for part in (method.upper().encode(), path.encode(), canonical):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()


class IdempotencyStore:
    def __init__(self, redis: Redis, prefix: str = "kadence:gw:", ttl_seconds: int = 24 * 3600) -> None:
        self.redis, self.prefix, self.ttl = redis, prefix, ttl_seconds

    def _key(self, namespace: str, key: str) -> str:
        # the client's key is hashed: any bytes, bounded length, nothing of it in Redis key names
        return f"{self.prefix}idem:{namespace}:{hashlib.sha256(key.encode()).hexdigest()}"

    async def claim(self, namespace: str, key: str, request_fingerprint: str) -> bool:
        """True when ``key`` is new in ``namespace`` or was first used for this same request."""
        rkey = self._key(namespace, key)
        if await self.redis.set(rkey, request_fingerprint, nx=True, ex=self.ttl):
            return True
        stored = await self.redis.get(rkey)
        if stored is None:  # expired between the two calls: claim again
            return await self.claim(namespace, key, request_fingerprint)
        return (stored.decode() if isinstance(stored, bytes) else stored) == request_fingerprint
