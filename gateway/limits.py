"""Rate limits: token buckets in Redis, shared by every gateway instance.

One Lua script takes a token from every bucket a request counts against (its namespace's and its
API key's) or from none: it refills each bucket for the time elapsed (Redis's clock, so instances
need no synchronised clocks), and when any bucket is short it changes nothing and returns how long
until the request would fit. Buckets expire once they would be full again, so idle ones cost no
memory.
"""

from __future__ import annotations

import math
from typing import Any

from redis.asyncio import Redis

from .config import RateLimit

__all__ = ["RateLimiter"]

# KEYS: bucket keys; ARGV: rate_1, burst_1, ..., rate_n, burst_n, cost
# returns {1, 0} when taken, {0, wait_ms} when a bucket is short
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = #KEYS
local cost = tonumber(ARGV[2 * n + 1])
local levels = {}
local wait = 0
for i = 1, n do
  local rate = tonumber(ARGV[2 * i - 1])
  local burst = tonumber(ARGV[2 * i])
  local b = redis.call('HMGET', KEYS[i], 'tokens', 'ts')
  local tokens = tonumber(b[1]) or burst
  local ts = tonumber(b[2]) or now
  tokens = math.min(burst, tokens + math.max(0, now - ts) * rate / 1000)
  levels[i] = tokens
  if tokens < cost then
    wait = math.max(wait, math.ceil((cost - tokens) * 1000 / rate))
  end
end
if wait > 0 then
  return {0, wait}
end
for i = 1, n do
  local rate = tonumber(ARGV[2 * i - 1])
  local burst = tonumber(ARGV[2 * i])
  redis.call('HSET', KEYS[i], 'tokens', tostring(levels[i] - cost), 'ts', tostring(now))
  redis.call('PEXPIRE', KEYS[i], math.ceil(burst * 1000 / rate) + 1000)
end
return {1, 0}
"""


class RateLimiter:
    """``await take(buckets)`` -> seconds to wait (0: allowed, a token was taken from each)."""

    def __init__(self, redis: Redis, prefix: str = "kadence:gw:") -> None:
        self.prefix = prefix
        self._script = redis.register_script(_TAKE)

    def bucket(self, kind: str, name: str) -> str:
        return f"{self.prefix}rl:{kind}:{name}"

    async def take(self, buckets: list[tuple[str, RateLimit]], cost: int = 1) -> float:
        live = [(key, limit) for key, limit in buckets if limit.enabled]
        if not live:
            return 0.0
        args: list[Any] = []
        for _key, limit in live:
            args += [repr(float(limit.rate)), limit.burst]
        taken, wait_ms = await self._script(keys=[k for k, _ in live], args=[*args, cost])
        return 0.0 if taken else max(0.001, int(wait_ms) / 1000)

    @staticmethod
    def retry_after(wait_seconds: float) -> str:
        """Retry-After header value: whole seconds, at least 1."""
        return str(max(1, math.ceil(wait_seconds)))
