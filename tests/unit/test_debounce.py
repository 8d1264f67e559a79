"""Debounced starts (decision 0059) in the state machine (simulated shards) and in the SDK (the
test environment: the run's code gets the last joined start's input). The broker test is
tests/integration/test_debounce.py."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kadence import InvalidArgumentError, SchemaError, workflow
from kadence.testing import WorkflowEnvironment
from kadence.topics.protocol import start_body
from tests.support.codecs import pin_write_version
from tests.support.slot_shards import Shards


def _start(shards: Shards, wf: str, n: int, *, debounce_ms: int = 5000, max_ms: int = 0, rid: str | None = None):
    body = {
        "workflow_type": "W",
        "task_queue": "q",
        "input": f"[{n}]".encode(),
        "debounce_ms": debounce_ms,
        "debounce_max_ms": max_ms,
    }
    shards.send(wf, "StartWorkflow", body, request_id=rid or f"start-{wf}-{n}")
    shards.drain()
    return shards.replies[-1]


def _advance(shards: Shards, to_ms: int) -> None:
    shards.ts = to_ms
    shards.fire_due()
    shards.drain()


def test_a_burst_gives_one_run_after_the_last_start_with_its_input():
    shards = Shards()
    t0 = shards.ts
    replies = []
    for n in range(10):  # one a second, under the 5 s debounce
        _advance(shards, t0 + n * 1000)
        replies.append(_start(shards, "d", n))
    assert {r["status"] for r in replies} == {"ok"} and len({r["run_id"] for r in replies}) == 1
    st = shards.state("d")
    last = st["debounce_until_ms"]
    assert last >= t0 + 9000 + 5000 and st["first_task_at_ms"] == last
    _advance(shards, last - 1)
    assert shards.take_tasks() == []  # every earlier timer fired and changed nothing
    _advance(shards, last)
    (task,) = shards.take_tasks()
    kinds = [e["attributes"][0] for e in task["events"]]
    assert kinds[0] == "WorkflowExecutionStarted" and kinds.count("WorkflowStartDebounced") == 9
    joined = [e for e in task["events"] if e["attributes"][0] == "WorkflowStartDebounced"]
    assert joined[-1]["attributes"][1]["input"] == b"[9]" and joined[-1]["request_id"] == "start-d-9"
    assert shards.state("d")["debounce_until_ms"] is None
    # the code has begun: a debounced start now meets the open run
    assert _start(shards, "d", 10)["status"] == "already_started"


def test_debounce_max_caps_the_wait_from_the_first_start():
    shards = Shards()
    t0 = shards.ts
    for n in range(8):  # one a second with a 2 s debounce: never quiet, but capped at 5 s
        _advance(shards, t0 + n * 1000)
        if shards.take_tasks():
            break
        _start(shards, "m", n, debounce_ms=2000, max_ms=5000)
    st = shards.state("m")
    assert st["debounce_until_ms"] is None and st["wt_scheduled_seq"] is not None
    started = next(e for e in shards.events if e["attributes"][0] == "WorkflowExecutionStarted")["timestamp_ms"]
    joined = [
        e["attributes"][1]["starts_at_ms"] for e in shards.events if e["attributes"][0] == "WorkflowStartDebounced"
    ]
    assert max(joined) == started + 5000  # the cap, not the last start plus 2 s
    first_task = next(e for e in shards.events if e["attributes"][0] == "WorkflowTaskScheduled")
    assert first_task["timestamp_ms"] >= started + 5000


def test_a_retried_start_of_the_burst_is_answered_again_and_records_nothing():
    shards = Shards()
    first = _start(shards, "r", 0)
    again = _start(shards, "r", 1, rid="same")
    events = len(shards.events)
    retried = _start(shards, "r", 1, rid="same")
    assert retried["run_id"] == again["run_id"] == first["run_id"] and len(shards.events) == events


def test_bad_debounces_are_refused_and_change_nothing():
    for ms, max_ms, cron in ((-1, 0, None), (8 * 86_400_000, 0, None), (5000, 1000, None), (0, 5000, None)):
        with pytest.raises(InvalidArgumentError):
            start_body("W", "q", b"[]", debounce_ms=ms, debounce_max_ms=max_ms, cron_schedule=cron)
    with pytest.raises(InvalidArgumentError, match="cron"):
        start_body("W", "q", b"[]", debounce_ms=1000, cron_schedule="@hourly")
    shards = Shards()
    reply = _start(shards, "bad", 0, debounce_ms=-5)  # a producer that skipped the checks
    assert reply["status"] == "rejected" and "debounce" in reply["message"] and shards.state("bad") is None


def test_a_process_pinned_below_the_debounce_version_refuses_it(monkeypatch):
    pin_write_version(monkeypatch, 17)
    try:
        with pytest.raises(SchemaError, match="debounced start needs schema version 18"):
            start_body("W", "q", b"[]", debounce_ms=1000)
        assert start_body("W", "q", b"[]")["debounce_ms"] == 0
    finally:
        pin_write_version(monkeypatch, None)


@workflow.defn
class Reindex:
    @workflow.run
    async def run(self, change: str) -> str:
        return f"reindexed after {change}"


async def test_the_code_runs_once_with_the_last_input_in_the_test_environment():
    async with WorkflowEnvironment(workflows=[Reindex]) as env:
        t0 = env.now()
        handles = [
            await env.client.start_workflow(
                Reindex, f"change-{i}", id="reindex-acme", task_queue="q", debounce=timedelta(seconds=30)
            )
            for i in range(5)
        ]
        assert len({h.run_id for h in handles}) == 1
        described = await handles[0].describe()
        assert described.execution_time is not None and described.status.value == "running"
        assert await handles[-1].result(timeout=10) == "reindexed after change-4"
        kinds = [e["type"] for e in await handles[0].history()]
        assert kinds.count("WorkflowStartDebounced") == 4 and kinds.count("WorkflowExecutionStarted") == 1
        assert env.now() - t0 >= timedelta(seconds=30)
        with pytest.raises(InvalidArgumentError, match="positive timedelta"):
            await env.client.start_workflow(Reindex, "x", id="r2", task_queue="q", debounce=timedelta(0))
