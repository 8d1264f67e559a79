"""Rate limits per key (decision 0058) in the state machine, on simulated shards
(``tests.support.slot_shards``): a rate limit's owner admits each request at the earliest time that
keeps every window of ``per_ms`` to ``max`` admissions, and the run (or activity) waits for that
time on a durable timer. The broker test is tests/integration/test_rate_limits.py."""

from __future__ import annotations

from datetime import timedelta

import click
import pytest

from kadence import InvalidArgumentError, Limit, SchemaError
from kadence._definitions import limit_records
from kadence.cli.periods import period_ms
from kadence.cli.workflows import _limit_option
from kadence.processors.effects import Outbox, description
from kadence.topics.concurrency import limits_problem, set_max_body
from kadence.topics.describe import describe_to_json
from kadence.topics.payload import JsonConverter
from tests.support.codecs import pin_write_version
from tests.support.slot_shards import OPTIONS, Shards

SECOND = timedelta(seconds=1)


def _admissions(shards: Shards, name: str = "api") -> list[tuple[str, int]]:
    """(workflow ID, admission time) of each rate-limit admission of ``name``, from the events."""
    return [
        (e["workflow_id"], e["attributes"][1]["not_before_ms"])
        for e in shards.events
        if e["attributes"][0] == "ConcurrencySlotAcquired" and e["attributes"][1]["name"] == name
    ]


def _first_tasks(shards: Shards) -> dict[str, int]:
    """The time of each workflow's first WorkflowTaskScheduled event."""
    out: dict[str, int] = {}
    for e in shards.events:
        if e["attributes"][0] == "WorkflowTaskScheduled":
            out.setdefault(e["workflow_id"], e["timestamp_ms"])
    return out


def _run_clock(shards: Shards, until_ms: int, step_ms: int = 50) -> None:
    """Advance the shards' clock to ``until_ms``, firing timers as they come due and
    completing every workflow task."""
    while shards.ts < until_ms:
        shards.ts += step_ms
        shards.fire_due()
        shards.run_some(shards.rng.randint(1, 40))
        for task in shards.take_tasks():
            shards.complete(task)
    shards.drain()


@pytest.mark.parametrize("seed", range(8))
def test_every_window_admits_at_most_max_and_no_run_starts_before_its_admission(seed):
    """40 runs under 3 per second, started in bursts at random times and interleavings of the
    shards: the admission times keep every 1-second window to 3, no run's first workflow task
    comes before its admission, the owner admitted in the order it was asked, and every run
    completes (delayed, not dropped)."""
    shards = Shards(seed)
    rng = shards.rng
    workflows = [f"rl-{i}" for i in range(40)]
    pending = list(workflows)
    while pending:
        n = rng.randint(1, 8)
        for wf in pending[:n]:
            shards.start(wf, [Limit("api", "x", max=3, per=SECOND), Limit("tenant", wf[-1], max=2)])
        pending = pending[n:]
        _run_clock(shards, shards.ts + rng.randint(0, 900))
    _run_clock(shards, shards.ts + 20_000)
    admitted = _admissions(shards)
    assert sorted(wf for wf, _ in admitted) == sorted(workflows)  # each admitted once
    times = sorted(at for _, at in admitted)
    for k in range(len(times) - 3):
        assert times[k + 3] - times[k] >= 1000, (k, times[k : k + 4])
    first = _first_tasks(shards)
    for wf, at in admitted:
        assert first[wf] >= at, (wf, first[wf], at)
    owner = shards.owner("api", "x", 1000)
    assert owner["recent_ms"] == sorted(owner["recent_ms"]) and len(owner["recent_ms"]) <= 3
    assert owner["granted"] == 40
    for wf in workflows:
        assert shards.state(wf)["status"] == "completed", wf


def test_a_burst_is_admitted_up_to_max_at_once_and_the_rest_spaced_by_the_window():
    shards = Shards()
    t0 = shards.ts
    for i in range(7):
        shards.start(f"b-{i}", [Limit("api", "y", max=3, per=SECOND)])
    shards.drain()
    times = sorted(at for _, at in _admissions(shards))
    assert len(times) == 7
    assert all(at < t0 + 1000 for at in times[:3])  # the first three at once
    assert times[3] - times[0] >= 1000 and times[6] - times[3] >= 1000
    waiting = [wf for wf in (f"b-{i}" for i in range(7)) if shards.state(wf)["throttled_until_ms"]]
    assert len(waiting) == 4
    assert len(shards.take_tasks()) == 3  # only the admitted ones have a workflow task
    state = shards.state(waiting[0])
    described = describe_to_json(
        waiting[0],
        {"status": "running", "run_id": state["run_id"], "failure": None, "description": _description(state)},
        JsonConverter(),
    )
    assert described["throttled_until"] is not None and described["waiting_for_slot"] is None


def _description(st):
    return description(st, Outbox())


def test_a_throttled_activity_waits_for_its_admission_without_an_attempt_out():
    shards = Shards()
    rated = {**OPTIONS, "concurrency": [Limit("api", "pay", max=1, per=timedelta(seconds=2)).to_record()]}
    shards.runs_scheduling_one_activity(("pay-1", "pay-2"), rated)
    (first,) = shards.take_tasks("activity")
    other = "pay-2" if first["workflow_id"] == "pay-1" else "pay-1"
    a = shards.state(other)["pending_activities"][0]
    admitted = dict(_admissions(shards))
    assert a["throttled"] and a["retrying"] and a["next_attempt_ms"] == admitted[first["workflow_id"]] + 2000
    assert admitted[other] == a["next_attempt_ms"] and first["scheduled_time_ms"] >= admitted[first["workflow_id"]]
    assert _description(shards.state(other))["pending_activities"][0]["throttled"]
    shards.ts = a["next_attempt_ms"] - 10
    assert shards.fire_due() == 0
    shards.ts = a["next_attempt_ms"]
    assert shards.fire_due() == 1
    shards.drain()
    (second,) = shards.take_tasks("activity")
    assert second["workflow_id"] == other and second["attempt"] == 1
    assert not shards.state(other)["pending_activities"][0]["throttled"]


def test_a_cron_time_and_an_admission_time_wait_for_the_later():
    """The two share the run's first-task time: an earlier timer does not start the run."""
    shards = Shards()
    for i in range(2):
        shards.start(f"c-{i}", [Limit("api", "z", max=1, per=timedelta(seconds=10))])
    shards.drain()
    st = shards.state("c-1")
    at = st["first_task_at_ms"]
    assert at is not None and at - shards.ts > 9000
    early = {"timer_id": "cron.x", "fire_at_ms": at - 5000, "kind": "cron_start", "scheduled_seq": 0, "attempt": 0}
    shards.send("c-1", "FireTimer", early, run_id=st["run_id"])
    shards.drain()
    assert [t["workflow_id"] for t in shards.take_tasks()] == ["c-0"]
    shards.ts = at
    shards.fire_due()
    shards.drain()
    assert [t["workflow_id"] for t in shards.take_tasks()] == ["c-1"]


def test_a_key_may_be_a_concurrency_and_a_rate_limit_and_bad_rates_are_refused():
    both = limit_records([Limit("api", "s", max=5), Limit("api", "s", max=10, per=SECOND)])
    assert [r["per_ms"] for r in both] == [None, 1000]
    with pytest.raises(InvalidArgumentError, match="named twice"):
        limit_records([Limit("api", "s", max=5, per=SECOND), Limit("api", "s", max=6, per=SECOND)])
    for bad in (
        {"max": 5, "per": timedelta(milliseconds=1)},
        {"max": 5, "per": timedelta(days=8)},
        {"max": 20_000, "per": SECOND},
    ):
        with pytest.raises(InvalidArgumentError, match="rate limit"):
            Limit("api", "s", **bad)
    with pytest.raises(InvalidArgumentError, match="timedelta"):
        Limit("api", "s", max=1, per=1)  # type: ignore[arg-type]
    assert limits_problem([{"name": "a", "value": "b", "max": 1, "per_ms": 0}])
    # the engine refuses what a client that skipped the checks sent, changing nothing
    shards = Shards()
    body = {"workflow_type": "W", "task_queue": "q", "input": b"[]"}
    body["concurrency"] = [{"name": "a", "value": "b", "max": 3, "per_ms": 5}]
    shards.send("bad", "StartWorkflow", body, request_id="bad-1")
    shards.drain()
    assert shards.state("bad") is None
    assert shards.replies[-1]["status"] == "rejected" and "window" in shards.replies[-1]["message"]


def test_a_process_pinned_below_the_rate_version_refuses_rate_limits(monkeypatch):
    pin_write_version(monkeypatch, 17)
    try:
        assert limit_records([Limit("api", "s", max=5)])  # concurrency limits are version 17
        with pytest.raises(SchemaError, match="rate limits need schema version 18"):
            limit_records([Limit("api", "s", max=5, per=SECOND)])
    finally:
        pin_write_version(monkeypatch, None)


def _set(shards, name, value, top, *, per_ms=None, rid="op-1"):
    key, body = set_max_body(name, value, top, per_ms=per_ms, identity="ops", reason="incident 7")
    shards.send(key, "ConcurrencySlot", body, request_id=rid)
    shards.drain()
    return shards.replies[-1]


def test_an_operators_max_applies_instead_of_the_requests_until_lifted():
    """Concurrency: raising the max admits waiters at once, the requests' max (1) no longer
    applies; lifting it lets the next request's max apply again. Rate: an operator's 3 per
    window admits 3 at once although the requests say 1."""
    shards = Shards()
    for i in range(4):
        shards.start(f"o-{i}", [Limit("tenant", "big", max=1)])
    shards.drain()
    assert len(shards.take_tasks()) == 1
    reply = _set(shards, "tenant", "big", 3)
    assert reply["status"] == "ok" and "set to 3" in reply["message"]
    assert len(shards.take_tasks()) == 2  # two waiters admitted by the raise
    cs = shards.owner("tenant", "big")
    assert (cs["max"], cs["override_max"], cs["override_by"], cs["override_reason"]) == (3, 3, "ops", "incident 7")
    shards.start("o-late", [Limit("tenant", "big", max=1)])  # a request's max does not undo it
    shards.drain()
    assert shards.owner("tenant", "big")["max"] == 3
    assert _set(shards, "tenant", "big", 0, rid="op-2")["status"] == "ok"
    shards.start("o-later", [Limit("tenant", "big", max=1)])
    shards.drain()
    cs = shards.owner("tenant", "big")
    assert cs["override_max"] is None and cs["max"] == 1  # the requests' max again
    _set(shards, "api", "slow", 3, per_ms=1000, rid="op-3")
    for i in range(4):
        shards.start(f"p-{i}", [Limit("api", "slow", max=1, per=SECOND)])
    shards.drain()
    times = sorted(at for _, at in _admissions(shards, "api"))
    assert times[2] - times[0] < 1000 <= times[3] - times[0]  # 3 in the window, not 1


def test_a_bad_operators_max_is_refused_before_anything_is_sent():
    for bad in ({"max": -1}, {"max": 20_000, "per_ms": 1000}, {"max": 2, "per_ms": 1}):
        with pytest.raises(InvalidArgumentError):
            set_max_body("a", "b", **bad)
    with pytest.raises(InvalidArgumentError, match="500"):
        set_max_body("a", "b", 2, reason="x" * 501)
    with pytest.raises(InvalidArgumentError):
        set_max_body("a=b", "c", 2)


def test_the_cli_reads_limits_and_periods():
    assert _limit_option("api=stripe:10/1s") == {"name": "api", "value": "stripe", "max": 10, "per_ms": 1000}
    assert _limit_option("tenant=a=b:3") == {"name": "tenant", "value": "a=b", "max": 3, "per_ms": None}
    assert [period_ms(t) for t in ("500ms", "2m", "1d", "5", "1x", "s")] == [500, 120_000, 86_400_000, None, None, None]
    with pytest.raises(click.BadParameter, match="PERIOD"):
        _limit_option("api=stripe:10/1fortnight")
