"""Task-queue rate limits (issue 46 item 1): the record's validation and the worker's pacing,
with a fake clock (the real broker's tests: tests/integration/test_queue_rate_limits.py)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from kadence._rate_limit import QueueRateLimiter, TokenBucket
from kadence.topics import serde
from kadence.topics.errors import InvalidArgumentError, InvalidIdentifierError
from kadence.topics.queue_limits import QueueLimit, decode_queue_limit


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def task(offset: int, activity_type: str = "charge", partition: int = 0) -> SimpleNamespace:
    value = serde.encode(
        "ActivityTask",
        {
            "workflow_id": f"wf{offset}",
            "run_id": "r",
            "workflow_type": "W",
            "activity_id": "1",
            "activity_type": activity_type,
            "task_queue": "q",
            "input": b"",
            "attempt": 1,
            "scheduled_seq": 1,
            "scheduled_time_ms": 0,
            "idempotency_key": "k",
            "heartbeat_details": None,
            "start_to_close_timeout_ms": None,
            "heartbeat_timeout_ms": None,
            "trace_id": None,
            "span_id": None,
            "headers": {},
        },
    )
    return SimpleNamespace(
        topic=lambda: "t", partition=lambda: partition, offset=lambda: offset, value=lambda: value, headers=lambda: None
    )


def drain(limiter: QueueRateLimiter, backlog: list, clock: Clock, seconds: float, step: float = 0.01) -> list:
    """Start what the limiter lets through over ``seconds`` of fake time; the started records."""
    started = []
    end = clock.t + seconds
    while clock.t < end:
        while (i := limiter.pick(backlog)) is not None:
            started.append(backlog.pop(i))
        clock.t += step
    return started


# -- the record ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"activities_per_second": 0},
        {"activities_per_second": -1},
        {"activities_per_second": math.nan},
        {"activities_per_second": math.inf},
        {"activities_per_second": 2e6},
        {"activities_per_second": "20"},
        {"activities_per_second": True},
        {"activity_types": {"charge": 0}},
        {"activity_types": {"": 5}},
        {"activity_types": ["charge"]},
        {"activity_types": {f"t{i}": 1 for i in range(101)}},
        {"reason": "x" * 501},
    ],
)
def test_a_bad_limit_is_an_invalid_argument(kwargs):
    with pytest.raises(InvalidArgumentError) as err:
        QueueLimit("orders", **kwargs)
    assert err.value.field in {"activities_per_second", "activity_types", "reason"}


def test_a_bad_task_queue_is_refused():
    with pytest.raises(InvalidIdentifierError):
        QueueLimit("bad queue!", activities_per_second=5)


def test_a_limit_round_trips_through_its_record_and_is_frozen():
    limit = QueueLimit("orders", 20, {"charge": 5}, 123, "ops", "stripe asked")
    back = decode_queue_limit("orders", serde.encode("QueueLimit", limit.to_record()))
    assert back == limit
    assert back.limited and back.limits_type("refund") and back.limits_type("charge")
    with pytest.raises(TypeError):
        back.activity_types["charge"] = 50  # type: ignore[index]
    only_types = QueueLimit("orders", None, {"charge": 5})
    assert only_types.limits_type("charge") and not only_types.limits_type("refund")
    assert not QueueLimit("orders").limited


# -- the token bucket -----------------------------------------------------------------------------


def test_a_bucket_refills_at_its_rate_and_holds_a_second_at_most():
    b = TokenBucket(4.0, 0.0)
    assert b.wait_s(0.0) == 0.0
    b.tokens -= 1
    assert b.wait_s(0.0) == pytest.approx(0.25)
    assert b.wait_s(100.0) == 0.0 and b.tokens == 4.0  # capped at a second's worth
    slow = TokenBucket(0.5, 0.0)
    slow.tokens -= 1
    assert slow.wait_s(1.0) == pytest.approx(1.0)


# -- the limiter ------------------------------------------------------------------------------------


def test_without_a_limit_everything_goes_in_order():
    limiter = QueueRateLimiter("q", clock=Clock())
    assert limiter.pick([]) is None
    assert limiter.pick([task(1), task(2)]) == 0
    assert not limiter.limits_type("charge")


def test_a_worker_holding_half_the_partitions_starts_half_the_limit():
    clock = Clock()
    waits = []
    limiter = QueueRateLimiter("q", clock=clock, on_throttled=waits.append)
    limiter.set_partitions({0, 1}, 4)
    limiter.set_limit(QueueLimit("q", 20))
    backlog = [task(i) for i in range(500)]
    started = drain(limiter, backlog, clock, 10.0)
    # 10 a second for 10 s, plus the token it starts with
    assert 99 <= len(started) <= 102
    assert [m.offset() for m in started] == list(range(len(started)))  # in order
    assert limiter.throttled >= 90 and len(waits) == limiter.throttled and max(waits) < 10
    assert limiter.limits_type("anything")


def test_shares_follow_the_partitions_and_a_limit_change_applies_at_once():
    clock = Clock()
    limiter = QueueRateLimiter("q", clock=clock)
    limiter.set_partitions(set(), 4)
    limiter.set_limit(QueueLimit("q", 8))
    backlog = [task(i) for i in range(1000)]
    assert len(drain(limiter, backlog, clock, 5.0)) <= 1  # no partition: a zero share (after the first token)
    limiter.set_partitions({0, 1, 2, 3})
    n = len(drain(limiter, backlog, clock, 5.0))
    assert 38 <= n <= 42
    limiter.set_limit(QueueLimit("q", 40))
    n = len(drain(limiter, backlog, clock, 5.0))
    assert 195 <= n <= 210
    limiter.set_limit(None)
    assert limiter.pick(backlog) == 0 and not limiter.limits_type("charge")


def test_a_worker_with_no_partitions_starts_nothing_under_a_limit():
    clock = Clock()
    limiter = QueueRateLimiter("q", clock=clock)
    limiter.set_partitions(set(), 4)
    limiter.set_limit(QueueLimit("q", 8))
    backlog = [task(i) for i in range(10)]
    started = drain(limiter, backlog, clock, 5.0)
    assert len(started) <= 1  # the one token a bucket starts with, then a rate of zero


def test_a_type_limit_holds_its_type_and_lets_the_others_pass():
    clock = Clock()
    limiter = QueueRateLimiter("q", clock=clock)
    limiter.set_partitions({0}, 1)
    limiter.set_limit(QueueLimit("q", None, {"charge": 2}))
    backlog = [task(i, "charge") for i in range(50)] + [task(100 + i, "email") for i in range(50)]
    started = drain(limiter, backlog, clock, 5.0)
    charges = [m for m in started if m.offset() < 100]
    emails = [m for m in started if m.offset() >= 100]
    assert 10 <= len(charges) <= 12
    assert len(emails) == 50  # not held behind the paced type
    assert limiter.limits_type("charge") and not limiter.limits_type("email")
    assert limiter.wait_s() > 0
    limiter.forget({("t", 0)})
    assert limiter._types == {} and limiter._held == {}


def test_queue_and_type_limits_hold_together():
    clock = Clock()
    limiter = QueueRateLimiter("q", clock=clock)
    limiter.set_partitions({0}, 1)
    limiter.set_limit(QueueLimit("q", 10, {"charge": 2}))
    backlog = [task(i, "charge" if i % 2 else "email") for i in range(400)]
    started = drain(limiter, backlog, clock, 10.0)
    charges = sum(1 for m in started if m.offset() % 2)
    assert 98 <= len(started) <= 102
    assert 19 <= charges <= 22


def test_the_share_follows_the_traffic_of_the_lanes_a_worker_holds():
    """A queue has five priority lanes and the group balances partition counts, not lanes: a
    worker holding every partition of the one busy lane takes the whole limit, one holding only
    idle lanes none of it (decision 0060)."""
    limiter = QueueRateLimiter("q")
    lanes = [f"lane{i}" for i in range(5)]
    busy_holder = {("lane2", p) for p in range(4)} | {("lane0", 0)}
    limiter.set_partitions(busy_holder, 20, 5)
    assert limiter.share == pytest.approx(5 / 20)  # no traffic known yet: a share of partitions
    limiter.set_lane_rates({lane: (100.0 if lane == "lane2" else 0.0) for lane in lanes})
    limiter.refresh()
    assert limiter.share == pytest.approx(1.0)
    limiter.set_partitions({("lane0", p) for p in range(4)} | {("lane1", 0)})
    assert limiter.share == pytest.approx(0.0)
    # traffic on two lanes, 3:1: holding half of each gives half; all of the busier one 3/4
    limiter.set_lane_rates({"lane1": 30.0, "lane3": 10.0})
    limiter.refresh()
    limiter.set_partitions({("lane1", 0), ("lane1", 1), ("lane3", 0), ("lane3", 1)})
    assert limiter.share == pytest.approx(0.5)
    limiter.set_partitions({("lane1", p) for p in range(4)})
    assert limiter.share == pytest.approx(0.75)
