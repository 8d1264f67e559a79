"""Fail fast while Redis does not answer.

The gateway's Redis client waits up to its socket timeout (2 s) for each command. With Redis hung
(SIGSTOP, a full network buffer), every request would hold its connection that long before its
503, and a burst of requests would pile up behind a dead dependency. The breaker below turns that
into one slow request: after a command fails to reach Redis (timeout, refused or dropped
connection), every command fails at once for ``open_seconds``; then one command probes, and the
others keep failing fast until the probe answers. Failing is always the closed side for the
gateway: a command that fails raises ``redis.exceptions.ConnectionError``, which every caller
already turns into ``503 unavailable`` (``Guard``, the idempotency store, the listing, ``/readyz``).

It sits in the connections (redis-py's ``connection_class``), so every command, pipeline and
script goes through it without a wrapper at each call site. redis-py has retries and health
checks but nothing that stops calling a dependency known to be down (checked in redis 8.1). The
circuit-breaker packages on PyPI (pybreaker, purgatory, circuitbreaker) wrap one call, a function
or a context manager around it; here the check (before a command is sent) and the outcome (when
its reply is read) come in two separate calls of redis-py's connection, so the small state below
is written by hand rather than bent around one of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.connection import Connection, parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["RedisBreaker", "guarded_redis"]

#: what counts as "Redis did not answer" (an error reply such as WRONGTYPE is an answer)
_DOWN = (RedisConnectionError, RedisTimeoutError, OSError)


class RedisBreaker:
    """Open (failing fast) for ``open_seconds`` after a failure; then one call probes.

    Used from one event loop: no locking."""

    def __init__(self, open_seconds: float = 2.0, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.open_seconds = open_seconds
        self._clock = clock
        #: 0: closed; otherwise calls before this time fail fast
        self._open_until = 0.0
        #: the failure that opened it (an exception's type name; never its message)
        self.last_failure: str | None = None
        #: how many calls failed fast
        self.refused = 0

    @property
    def is_open(self) -> bool:
        return self._open_until > 0.0

    def check(self) -> None:
        """Raise ``ConnectionError`` at once while open; let one call through as the probe when
        the open time has passed (the calls after it fail fast until the probe ends)."""
        if self._open_until == 0.0:
            return
        now = self._clock()
        if now < self._open_until:
            self.refused += 1
            raise RedisConnectionError(
                f"Redis did not answer ({self.last_failure}); not asked again for {self._open_until - now:.1f} s"
            )
        self._open_until = now + self.open_seconds  # this call is the probe

    def failed(self, exc: BaseException) -> None:
        self._open_until = self._clock() + self.open_seconds
        self.last_failure = type(exc).__name__

    def succeeded(self) -> None:
        self._open_until = 0.0


class _Guarded:
    """Mixed into a redis-py connection class: each command asks the breaker first, and each
    outcome is reported to it."""

    def __init__(self, *, breaker: RedisBreaker, **kw: Any) -> None:
        super().__init__(**kw)
        self._breaker = breaker

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        self._breaker.check()
        try:
            await super().send_packed_command(command, check_health)  # type: ignore[misc]
        except _DOWN as exc:
            self._breaker.failed(exc)
            raise

    async def read_response(self, *args: Any, **kw: Any) -> Any:
        try:
            response = await super().read_response(*args, **kw)  # type: ignore[misc]
        except _DOWN as exc:
            self._breaker.failed(exc)
            raise
        self._breaker.succeeded()
        return response


#: the connections of a gateway's pool, and how long a request waits for one when all are busy
POOL_CONNECTIONS = 100
POOL_WAIT_S = 2.0


def guarded_redis(url: str, breaker: RedisBreaker, **kw: Any) -> Redis:
    """A ``redis.asyncio.Redis`` for ``url`` (redis://, rediss://, unix://) whose connections go
    through ``breaker``; ``kw``: connection options (socket_timeout, retry, ...)."""
    options = parse_url(url)
    base = options.pop("connection_class", Connection)
    guarded = type(f"Guarded{base.__name__}", (_Guarded, base), {})
    # A burst of more requests than the pool's connections waits for one (up to POOL_WAIT_S)
    # instead of failing: redis-py's plain pool (100 connections by default in the version locked here) raised
    # MaxConnectionsError at the 101st concurrent request, a 503 for a healthy Redis (seen with 100
    # Server-Sent Events clients connecting at once). A wait that runs out is still a 503.
    # (parse_url's options hold no connection_class: popped above; mypy cannot see that)
    pool = BlockingConnectionPool(
        connection_class=guarded,
        breaker=breaker,
        max_connections=POOL_CONNECTIONS,
        timeout=POOL_WAIT_S,
        **options,
        **kw,
    )  # type: ignore[misc]
    return Redis(connection_pool=pool)
