"""The gateway's configuration: one frozen dataclass, each setting with its environment variable."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kadence.topics import settings
from kadence.topics.archive import ArchiveStoreConfig
from kadence.topics.config import NAMESPACE_RE, KafkaConfig
from kadence.topics.errors import ConfigError
from kadence.topics.large_payloads import LargePayloadConfig
from kadence.topics.payload import load_codec
from kadence.topics.settings import setting

from .consistency import ConsistencyToken

__all__ = ["GatewayConfig", "RateLimit", "ReadYourWrites"]

#: awaited before a read that carries a consistency token: returns once the read model the read
#: goes to has caught up with the token (or raises BrokerUnavailableError -> 503)
ReadYourWrites = Callable[[str, ConsistencyToken], Awaitable[None]]


async def reads_are_consistent(_namespace: str, _token: ConsistencyToken) -> None:
    """The default: reads go to the engine (describe, query) and to Kafka (history), which already
    show every committed change, so there is nothing to wait for."""


@dataclass(frozen=True)
class RateLimit:
    """A token bucket: ``rate`` requests per second on average, bursts of up to ``burst``.
    A rate of 0 disables the limit."""

    rate: float
    burst: int

    @classmethod
    def parse(cls, text: str) -> RateLimit:
        """``"RATE:BURST"``, e.g. ``"100:200"``; ``"0"`` disables."""
        try:
            rate, _, burst = text.partition(":")
            limit = cls(float(rate), int(burst) if burst else max(1, int(float(rate) * 2)))
        except ValueError as exc:
            raise ConfigError(f"a rate limit is RATE:BURST (e.g. 100:200), got {text!r}") from exc
        if limit.rate < 0 or (limit.rate > 0 and limit.burst < 1):
            raise ConfigError(f"a rate limit needs rate >= 0 and burst >= 1, got {text!r}")
        return limit

    @property
    def enabled(self) -> bool:
        return self.rate > 0


def _namespace_list(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())


@dataclass(frozen=True, kw_only=True)
class GatewayConfig:
    """The gateway's settings: those made with ``setting`` are read from their environment
    variables by ``from_env`` (``topics.settings``)."""

    kafka: KafkaConfig
    reply_timeout: float = setting(
        15.0, env="KADENCE_GATEWAY_REPLY_TIMEOUT", help="seconds to wait for the engine's reply before a 503"
    )
    max_body_bytes: int = setting(
        2 * 1024 * 1024, env="KADENCE_GATEWAY_MAX_BODY", help="largest accepted request body in bytes"
    )
    redis_url: str | None = setting(
        None,
        env="KADENCE_REDIS_URL",
        help="API keys, rate limits and idempotency fingerprints live there (and /readyz checks it); "
        "required unless auth is off",
    )
    redis_fail_fast_seconds: float = setting(
        2.0,
        env="KADENCE_GATEWAY_REDIS_FAIL_FAST_S",
        help="after Redis failed to answer, seconds during which every request that needs it gets its "
        "503 at once, without asking Redis (then one request probes)",
    )
    redis_prefix: str = setting(
        "kadence:gw:", env="KADENCE_GATEWAY_REDIS_PREFIX", help="prefix of every Redis key the gateway writes"
    )
    auth: bool = setting(
        True, env="KADENCE_GATEWAY_AUTH", help="API keys required (0: kadence gateway --no-auth, development only)"
    )
    auth_cache_seconds: float = setting(
        5.0,
        env="KADENCE_GATEWAY_AUTH_CACHE_S",
        help="seconds a verified API key is trusted without asking Redis again (a revoked key stops "
        "working within this time; reads keep working this long when Redis is down)",
    )
    namespaces: tuple[str, ...] = setting(
        (),
        env="KADENCE_GATEWAY_NAMESPACES",
        parse=_namespace_list,
        help="with auth off, namespaces served besides the default one (comma-separated); with auth "
        "on, a key's namespace is the one it may use",
    )
    namespace_limit: RateLimit = setting(
        RateLimit(1000, 2000),
        env="KADENCE_GATEWAY_NS_LIMIT",
        parse=RateLimit.parse,
        help="per-namespace token bucket, RATE:BURST (0 disables); default 1000:2000",
    )
    key_limit: RateLimit = setting(
        RateLimit(200, 400),
        env="KADENCE_GATEWAY_KEY_LIMIT",
        parse=RateLimit.parse,
        help="per-API-key token bucket unless the key has its own, RATE:BURST (0 disables); default 200:400",
    )
    idempotency_ttl_seconds: int = setting(
        24 * 3600,
        env="KADENCE_GATEWAY_IDEMPOTENCY_TTL_S",
        help="how long an Idempotency-Key's request fingerprint is kept",
    )
    #: Retry-After (seconds) sent with a 503
    retry_after_seconds: int = 5
    max_wait_seconds: float = setting(
        60.0,
        env="KADENCE_GATEWAY_MAX_WAIT_S",
        help="the longest a request waits for a result or new history events (a start's wait_seconds, "
        "history's long-poll) whatever it asks for",
    )
    #: read-your-writes hook, see :data:`ReadYourWrites`
    read_your_writes: ReadYourWrites = reads_are_consistent
    #: KADENCE_ARCHIVE_DIR / KADENCE_ARCHIVE_S3_*: where archived histories are read from (the
    #: history operation serves a run from there once archival removed it from Kafka); None: no archive
    archive: ArchiveStoreConfig | None = None
    codec: Any = setting(
        None,
        env="KADENCE_CODEC",
        parse=load_codec,
        help="module:factory of the payload codec the applications use; the gateway encodes what it is "
        "sent with it and shows results and history decoded (none: payloads as they are)",
    )
    #: KADENCE_PAYLOAD_*: where payloads over the size threshold are stored (a start's input the
    #: gateway is sent, and the results and history it shows); no store by default
    large_payloads: LargePayloadConfig = field(default_factory=LargePayloadConfig)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.auth and not self.redis_url:
            raise ConfigError(
                "the gateway's API keys live in Redis: set KADENCE_REDIS_URL (or run with --no-auth for development)"
            )
        for ns in self.namespaces:
            if not NAMESPACE_RE.match(ns):
                raise ConfigError(f"namespace {ns!r} must match {NAMESPACE_RE.pattern}")
        if self.redis_fail_fast_seconds < 0:
            raise ConfigError("redis_fail_fast_seconds must be 0 or more")
        if self.max_body_bytes < 1 or self.reply_timeout <= 0:
            raise ConfigError("max_body_bytes and reply_timeout must be positive")

    @classmethod
    def from_env(cls, kafka: KafkaConfig, env: Mapping[str, str] | None = None, **overrides: Any) -> GatewayConfig:
        """The settings from the environment, with the payload store's and the archive's (their
        own declarations); ``overrides`` win."""
        env = os.environ if env is None else env
        composed: dict[str, Any] = {"large_payloads": LargePayloadConfig.from_env(env)}
        if env.get("KADENCE_ARCHIVE_DIR") or env.get("KADENCE_ARCHIVE_S3_BUCKET"):
            composed["archive"] = ArchiveStoreConfig.from_env(env)
        return settings.from_env(cls, env, kafka=kafka, **{**composed, **overrides})
