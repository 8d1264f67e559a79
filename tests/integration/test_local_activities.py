"""Local activities (decision 0043) on the real broker: run by the worker inside the workflow
task, recorded as markers with its completion, taken from the markers on replay, retried within
the task, and a failure reaches the workflow as ActivityError."""

from __future__ import annotations

import collections
from datetime import timedelta

import pytest

from kadence import (
    ActivityError,
    ApplicationError,
    NonDeterminismError,
    Replayer,
    RetryPolicy,
    Worker,
    activity,
    workflow,
)

from .conftest import wait_until
from .invariants import check_history, histories

#: (workflow ID, activity) -> times run
CALLS: collections.Counter = collections.Counter()
#: workflow ID -> attempts of ``flaky`` still to fail
FAILURES: dict[str, int] = {}


@activity.defn
async def charge(amount: int) -> int:
    CALLS[(activity.info().workflow_id, "charge")] += 1
    return amount * 2


@activity.defn
def reserve(sku: str) -> str:
    CALLS[(activity.info().workflow_id, "reserve")] += 1
    return f"reserved:{sku}"


@activity.defn
async def flaky(x: int) -> int:
    wid = activity.info().workflow_id
    CALLS[(wid, "flaky")] += 1
    if FAILURES.get(wid, 0) > 0:
        FAILURES[wid] -= 1
        raise RuntimeError(f"transient, attempt {activity.info().attempt}")
    return x


@activity.defn
async def refuse(x: int) -> int:
    raise ApplicationError("card declined", type="Declined", non_retryable=True)


@workflow.defn
class ThreeLocal:
    @workflow.run
    async def run(self, n: int) -> list:
        a = await workflow.execute_local_activity(charge, n)
        b = await workflow.execute_local_activity(reserve, f"sku-{a}")
        c = await workflow.execute_local_activity(charge, a)
        return [a, b, c]


@workflow.defn
class LocalThenSignal:
    def __init__(self):
        self.go = False

    @workflow.signal
    def proceed(self):
        self.go = True

    @workflow.run
    async def run(self, n: int) -> list:
        first = await workflow.execute_local_activity(charge, n)
        await workflow.wait_condition(lambda: self.go)
        second = await workflow.execute_local_activity(charge, first)
        return [first, second]


@workflow.defn
class LocalFailures:
    @workflow.run
    async def run(self, n: int) -> list:
        retried = await workflow.execute_local_activity(
            flaky, n, retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=10), maximum_attempts=3)
        )
        try:
            await workflow.execute_local_activity(refuse, n)
        except ActivityError as exc:
            return [retried, type(exc.__cause__).__name__, str(exc.__cause__)]
        return [retried, "no error"]


@workflow.defn
class ActivityThenLocal:
    @workflow.run
    async def run(self, n: int) -> list:
        a = await workflow.execute_activity(charge, n, start_to_close_timeout=timedelta(seconds=30))
        b = await workflow.execute_local_activity(reserve, str(a))
        return [a, b]


def _run_of(config, wid: str) -> list[dict]:
    [events] = [v for k, v in histories(config).items() if k[0] == wid]
    return events


def _kinds(events):
    return [e["attributes"][0] for e in events]


async def test_three_local_activities_complete_in_one_workflow_task(client, processors, kafka_config):
    processors.start()
    async with Worker(client, task_queue="q", workflows=[ThreeLocal], activities=[charge, reserve]) as worker:
        result = await client.execute_workflow(
            ThreeLocal, 5, id="local-three", task_queue="q", timeout=60, result_timeout=60
        )
    assert result == [10, "reserved:sku-10", 20]
    assert worker.stats["workflow_tasks"] == 1 and worker.stats["local_activities_completed"] == 3
    assert CALLS[("local-three", "charge")] == 2 and CALLS[("local-three", "reserve")] == 1
    events = _run_of(kafka_config, "local-three")
    assert check_history(events) == []
    kinds = _kinds(events)
    assert "ActivityTaskScheduled" not in kinds
    markers = [e["attributes"][1]["name"] for e in events if e["attributes"][0] == "MarkerRecorded"]
    assert markers == ["local_activity:1:charge", "local_activity:2:reserve", "local_activity:3:charge"]
    # the markers hold the outcomes: a replay needs no activity, and runs none
    assert Replayer(workflows=[ThreeLocal]).replay(events).ok
    assert CALLS[("local-three", "charge")] == 2


async def test_a_new_worker_replays_local_activities_from_their_markers(client, processors, kafka_config):
    processors.start()
    async with Worker(client, task_queue="q", workflows=[LocalThenSignal], activities=[charge]) as worker:
        handle = await client.start_workflow(LocalThenSignal, 3, id="local-replay", task_queue="q", timeout=60)
        await wait_until(lambda: worker.stats["workflow_tasks"] >= 1, 30, "the first workflow task")
    assert CALLS[("local-replay", "charge")] == 1
    # another worker, without the instance: it rebuilds the workflow from the whole history
    async with Worker(client, task_queue="q", workflows=[LocalThenSignal], activities=[charge]) as second:
        await handle.signal("proceed")
        assert await handle.result(timeout=60) == [6, 12]
    assert second.stats["history_requests"] >= 1
    assert CALLS[("local-replay", "charge")] == 2  # the first ran once: its replay took the marker
    assert check_history(_run_of(kafka_config, "local-replay")) == []


async def test_local_activities_retry_within_the_task_and_failures_reach_the_workflow(client, processors, kafka_config):
    FAILURES["local-fail"] = 2
    processors.start()
    async with Worker(client, task_queue="q", workflows=[LocalFailures], activities=[flaky, refuse]) as worker:
        result = await client.execute_workflow(
            LocalFailures, 7, id="local-fail", task_queue="q", timeout=60, result_timeout=60
        )
    assert result == [7, "ApplicationError", "card declined"]
    assert CALLS[("local-fail", "flaky")] == 3  # two failed attempts, then the result
    assert worker.stats["local_activities_failed"] == 1
    events = _run_of(kafka_config, "local-fail")
    names = [e["attributes"][1]["name"] for e in events if e["attributes"][0] == "MarkerRecorded"]
    assert names == ["local_activity:1:flaky", "local_activity_failed:2:refuse"]
    assert Replayer(workflows=[LocalFailures]).replay(events).ok


async def test_a_replay_that_calls_another_local_activity_is_non_deterministic(client, processors, kafka_config):
    processors.start()
    async with Worker(client, task_queue="q", workflows=[ThreeLocal], activities=[charge, reserve]):
        await client.execute_workflow(ThreeLocal, 1, id="local-changed", task_queue="q", timeout=60, result_timeout=60)

    @workflow.defn(name="ThreeLocal")
    class Changed:
        @workflow.run
        async def run(self, n: int) -> list:
            a = await workflow.execute_local_activity(reserve, str(n))  # was charge
            return [a]

    with pytest.raises(NonDeterminismError, match="local activity 'reserve'"):
        Replayer(workflows=[Changed]).replay(_run_of(kafka_config, "local-changed"))


async def test_an_eager_task_that_calls_a_local_activity_leaves_it_to_the_engines_task(
    client, processors, kafka_config
):
    # the eager task would be sent with the activity's result, before the local activity could
    # run: it is not sent, and the workflow task the engine schedules runs the local activity
    processors.start()
    async with Worker(client, task_queue="q", workflows=[ActivityThenLocal], activities=[charge, reserve]) as worker:
        result = await client.execute_workflow(
            ActivityThenLocal, 4, id="local-after", task_queue="q", timeout=60, result_timeout=60
        )
    assert result == [8, "reserved:8"]
    assert worker.stats["eager_workflow_tasks"] == 0 and CALLS[("local-after", "reserve")] == 1
    events = _run_of(kafka_config, "local-after")
    assert check_history(events) == []
    assert Replayer(workflows=[ActivityThenLocal]).replay(events).ok


async def test_the_worker_that_ran_them_goes_on_from_its_cached_instance(client, processors, kafka_config):
    # the next task's events open with the markers: the cached instance matches them against the
    # marker commands it sent, and asks for no history
    processors.start()
    async with Worker(client, task_queue="q", workflows=[LocalThenSignal], activities=[charge]) as worker:
        handle = await client.start_workflow(LocalThenSignal, 5, id="local-cached", task_queue="q", timeout=60)
        await wait_until(lambda: worker.stats["workflow_tasks"] >= 1, 30, "the first workflow task")
        await handle.signal("proceed")
        assert await handle.result(timeout=60) == [10, 20]
    assert worker.stats["history_requests"] == 0 and worker.stats["non_determinism"] == 0
    assert CALLS[("local-cached", "charge")] == 2
    events = _run_of(kafka_config, "local-cached")
    assert check_history(events) == []
    assert Replayer(workflows=[LocalThenSignal]).replay(events).ok
