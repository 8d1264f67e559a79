"""Who may do what: API key -> namespace -> quota, checked before a request is parsed or routed.

The order is fixed and cheap first: 401 without a valid key, 403 when the request addresses a
namespace that is not the key's (before anything about the workflow is looked up, so a key cannot
tell whether a workflow of another namespace exists), 429 over the namespace's or the key's token
bucket. Redis answers the key lookup and the quota; when it does not answer, a mutation gets a 503
(and produces nothing), while a read is let through if its key was verified within
``auth_cache_seconds`` (the quota is then not counted: see docs/decisions/0015).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from redis.exceptions import RedisError

from kadence.topics.config import NAMESPACE_RE

from .config import GatewayConfig, RateLimit
from .errors import ApiError
from .keys import ApiKey, ApiKeyStore, parse_key
from .limits import RateLimiter

__all__ = ["NAMESPACE_HEADER", "Guard", "Principal"]

log = logging.getLogger(__name__)

NAMESPACE_HEADER = "Kadence-Namespace"


@dataclass(frozen=True)
class Principal:
    """The caller of one request: the namespace it acts in and its key (None with auth off)."""

    namespace: str
    key_id: str | None = None


class Guard:
    def __init__(self, config: GatewayConfig, keys: ApiKeyStore | None, limiter: RateLimiter | None) -> None:
        self.config, self.keys, self.limiter = config, keys, limiter
        self._verified: dict[str, tuple[ApiKey, str, float]] = {}  # key id -> (record, digest, when)

    def _unavailable(self, what: str) -> ApiError:
        return ApiError(
            503,
            "unavailable",
            f"{what} did not answer; retry later",
            headers={"Retry-After": str(self.config.retry_after_seconds)},
        )

    async def admit(self, headers: Mapping[str, str], *, mutation: bool) -> Principal:
        key = await self._authenticate(headers, mutation) if self.config.auth else None
        namespace = self._namespace(headers, key)
        await self._take_quota(namespace, key, mutation)
        return Principal(namespace, key.key_id if key else None)

    async def _authenticate(self, headers: Mapping[str, str], mutation: bool) -> ApiKey:
        challenge = {"WWW-Authenticate": 'Bearer realm="kadence"'}
        scheme, _, token = (headers.get("authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(401, "unauthenticated", "send an API key: Authorization: Bearer <key>", headers=challenge)
        parsed = parse_key(token.strip())
        if parsed is None:
            raise ApiError(401, "unauthenticated", "the API key is not valid", headers=challenge)
        key_id, whole = parsed
        cached = self._verified.get(key_id)
        # a mutation always asks Redis (a revoked key never changes anything again); a read trusts
        # a key this instance verified within auth_cache_seconds, and nothing older: when Redis
        # does not answer, an older key gets the 503 like an unknown one (fail closed, issue 16)
        fresh = not mutation and cached is not None and time.monotonic() - cached[2] < self.config.auth_cache_seconds
        if fresh and cached is not None:
            record, digest = cached[0], cached[1]
        else:
            if self.keys is None:  # authentication on and no key store: nothing can be verified
                raise self._unavailable("the API key store")
            try:
                found = await self.keys.lookup(key_id)
            except (RedisError, OSError) as exc:
                log.warning("API key lookup failed, Redis unavailable: %s", type(exc).__name__)
                raise self._unavailable("Redis (API keys)") from exc
            else:
                if found is None:
                    self._verified.pop(key_id, None)
                    raise ApiError(401, "unauthenticated", "the API key is not valid", headers=challenge)
                record, digest = found
        if not ApiKeyStore.matches(whole, digest):
            raise ApiError(401, "unauthenticated", "the API key is not valid", headers=challenge)
        if not fresh:
            self._verified[key_id] = (record, digest, time.monotonic())
        return record

    def _namespace(self, headers: Mapping[str, str], key: ApiKey | None) -> str:
        asked = headers.get(NAMESPACE_HEADER.lower())
        if key is not None:
            if asked is not None and asked != key.namespace:
                raise ApiError(403, "forbidden", "this API key may not act in that namespace")
            return key.namespace
        namespace = asked if asked is not None else self.config.kafka.namespace
        if not NAMESPACE_RE.match(namespace):
            raise ApiError(
                400, "invalid_input", f"{NAMESPACE_HEADER} must match {NAMESPACE_RE.pattern}", field=NAMESPACE_HEADER
            )
        if namespace != self.config.kafka.namespace and namespace not in self.config.namespaces:
            raise ApiError(403, "forbidden", f"this gateway does not serve namespace {namespace!r}")
        return namespace

    async def _take_quota(self, namespace: str, key: ApiKey | None, mutation: bool) -> None:
        if self.limiter is None:
            return
        buckets = [(self.limiter.bucket("ns", namespace), self.config.namespace_limit)]
        if key is not None:
            # a key has both or neither (ApiKeyStore.create refuses one without the other)
            own = self.config.key_limit
            if key.rate is not None and key.burst is not None:
                own = RateLimit(key.rate, key.burst)
            buckets.append((self.limiter.bucket("key", key.key_id), own))
        try:
            wait = await self.limiter.take(buckets)
        except (RedisError, OSError) as exc:
            if mutation:
                log.warning("rate limit check failed, Redis unavailable: %s", type(exc).__name__)
                raise self._unavailable("Redis (rate limits)") from exc
            return  # a read is not refused for want of its quota check
        if wait:
            raise ApiError(
                429,
                "rate_limited",
                f"over the request quota of namespace {namespace!r} or of this key",
                headers={"Retry-After": RateLimiter.retry_after(wait)},
            )
