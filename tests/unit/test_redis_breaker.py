"""The gateway's Redis breaker: fail fast while open, one probe after, closed on an answer."""

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from kadence.gateway.config import GatewayConfig
from kadence.gateway.redis_breaker import RedisBreaker, _Guarded
from kadence.topics import ConfigError, KafkaConfig


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_closed_until_a_failure_then_open_for_its_time_then_one_probe():
    clock = Clock()
    breaker = RedisBreaker(2.0, clock=clock)
    breaker.check()  # closed: nothing raised
    breaker.failed(TimeoutError("read timed out"))
    assert breaker.is_open and breaker.last_failure == "TimeoutError"
    with pytest.raises(RedisConnectionError, match=r"TimeoutError.*not asked again for 2.0 s"):
        breaker.check()
    clock.now += 1.9
    with pytest.raises(RedisConnectionError):
        breaker.check()
    assert breaker.refused == 2
    clock.now += 0.2
    breaker.check()  # the probe goes through ...
    with pytest.raises(RedisConnectionError):  # ... and the calls beside it fail fast
        breaker.check()
    breaker.succeeded()
    assert not breaker.is_open
    breaker.check()


def test_a_failed_probe_opens_it_again():
    clock = Clock()
    breaker = RedisBreaker(1.0, clock=clock)
    breaker.failed(OSError("refused"))
    clock.now += 1.5
    breaker.check()
    breaker.failed(OSError("refused"))
    with pytest.raises(RedisConnectionError, match="OSError"):
        breaker.check()


class FakeConnection:
    """Stands in for redis-py's connection: answers, or fails as told."""

    def __init__(self, **kw):
        self.sent, self.reply = [], b"PONG"

    async def send_packed_command(self, command, check_health=True):
        self.sent.append(command)

    async def read_response(self, *args, **kw):
        if isinstance(self.reply, BaseException):
            raise self.reply
        return self.reply


class Guarded(_Guarded, FakeConnection):
    pass


async def test_the_connection_reports_outcomes_and_sends_nothing_while_open():
    clock = Clock()
    breaker = RedisBreaker(2.0, clock=clock)
    conn = Guarded(breaker=breaker)
    await conn.send_packed_command(b"PING")
    assert await conn.read_response() == b"PONG"
    conn.reply = ResponseError("WRONGTYPE")  # an error reply is an answer: the breaker stays closed
    with pytest.raises(ResponseError):
        await conn.read_response()
    assert not breaker.is_open
    conn.reply = RedisConnectionError("Connection closed by server.")
    with pytest.raises(RedisConnectionError):
        await conn.read_response()
    assert breaker.is_open
    with pytest.raises(RedisConnectionError, match="not asked again"):
        await conn.send_packed_command(b"GET k")
    assert conn.sent == [b"PING"]  # nothing sent while open
    clock.now += 3
    conn.reply = b"v"
    await conn.send_packed_command(b"GET k")
    assert await conn.read_response() == b"v" and not breaker.is_open


def test_the_fail_fast_time_is_configured_and_checked():
    kafka = KafkaConfig(bootstrap="127.0.0.1:1", namespace="t")
    config = GatewayConfig.from_env(
        kafka, {"KADENCE_REDIS_URL": "redis://x", "KADENCE_GATEWAY_REDIS_FAIL_FAST_S": "0.5"}
    )
    assert config.redis_fail_fast_seconds == 0.5
    with pytest.raises(ConfigError, match="redis_fail_fast_seconds"):
        GatewayConfig(kafka=kafka, redis_url="redis://x", redis_fail_fast_seconds=-1)
