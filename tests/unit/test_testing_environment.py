"""``kadence.testing.WorkflowEnvironment``: workflows run to their results with no broker, on the
real state machine; timers are skipped while a result is awaited; activities retry; signals,
queries, cancellation and children work; a workflow whose code fails raises a typed error."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from kadence import (
    Limit,
    RetryPolicy,
    WorkflowAlreadyStartedError,
    WorkflowCanceledError,
    WorkflowFailureError,
    WorkflowTerminatedError,
    WorkflowTimedOutError,
    activity,
    workflow,
)
from kadence.testing import WorkflowEnvironment, WorkflowTaskFailedError

CALLS: list[str] = []
T = timedelta(seconds=10)


@activity.defn
async def send_email(to: str) -> str:
    CALLS.append(f"email {to} attempt {activity.info().attempt}")
    return f"sent to {to}"


@activity.defn
def add(x: int, y: int) -> int:  # a sync activity runs on a thread
    return x + y


@activity.defn
async def flaky(tag: str) -> str:
    if activity.info().attempt < 3:
        raise RuntimeError(f"{tag} not yet")
    return f"{tag} on attempt {activity.info().attempt}"


@workflow.defn
class Reminder:
    @workflow.run
    async def run(self, to: str) -> str:
        await workflow.sleep(timedelta(days=30))
        return await workflow.execute_activity(send_email, to, start_to_close_timeout=T)


@workflow.defn
class MailTwice:
    @workflow.run
    async def run(self, to: str) -> str:
        return await workflow.execute_activity(
            send_email, to, start_to_close_timeout=T, retry_policy=RetryPolicy(maximum_attempts=2)
        )


@workflow.defn
class Sum:
    @workflow.run
    async def run(self, n: int) -> int:
        total = 0
        for i in range(n):
            total = await workflow.execute_activity(add, total, i, start_to_close_timeout=T)
        return total


@workflow.defn
class Retrying:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(
            flaky, "x", start_to_close_timeout=T, retry_policy=RetryPolicy(initial_interval=timedelta(minutes=5))
        )


@workflow.defn
class Approval:
    def __init__(self) -> None:
        self.approvals: list[str] = []

    @workflow.signal
    def approve(self, who: str) -> None:
        self.approvals.append(who)

    @workflow.query
    def count(self) -> int:
        return len(self.approvals)

    @workflow.run
    async def run(self, needed: int) -> list:
        await workflow.wait_condition(lambda: len(self.approvals) >= needed)
        return self.approvals


@workflow.defn
class Parent:
    @workflow.run
    async def run(self, n: int) -> int:
        return await workflow.execute_child_workflow(Sum, n, id=f"{workflow.info().workflow_id}-child")


@workflow.defn
class Buggy:
    @workflow.run
    async def run(self) -> None:
        time.sleep(0.01)  # the bug under test: a blocking sleep in workflow code


async def test_a_30_day_sleep_takes_milliseconds_and_history_is_the_engines():
    CALLS.clear()
    async with WorkflowEnvironment(workflows=[Reminder], activities=[send_email]) as env:
        before, t0 = env.now(), time.monotonic()
        handle = await env.client.start_workflow(Reminder, "ann", id="r-1", task_queue="mail")
        assert await handle.result(timeout=10) == "sent to ann"
        assert time.monotonic() - t0 < 5
        assert env.now() - before >= timedelta(days=30)
        kinds = [e["type"] for e in await handle.history()]
    assert CALLS == ["email ann attempt 1"]
    assert kinds[0] == "WorkflowExecutionStarted" and kinds[-1] == "WorkflowExecutionCompleted"
    assert "TimerFired" in kinds


async def test_sync_activities_in_sequence():
    async with WorkflowEnvironment(workflows=[Sum], activities=[add]) as env:
        assert await env.client.execute_workflow(Sum, 5, id="s-1", task_queue="q") == 10


async def test_retries_wait_out_their_backoff_on_the_virtual_clock():
    async with WorkflowEnvironment(workflows=[Retrying], activities=[flaky]) as env:
        t0 = time.monotonic()
        assert await env.client.execute_workflow(Retrying, id="f-1", task_queue="q") == "x on attempt 3"
        assert time.monotonic() - t0 < 5  # two 5-minute (and longer) backoffs, skipped


async def test_an_activity_mock_replaces_the_real_one_by_name():
    @activity.defn(name="send_email")
    async def fake_email(to: str) -> str:
        return f"pretended to mail {to}"

    async with WorkflowEnvironment(workflows=[Reminder], activities=[fake_email]) as env:
        assert await env.client.execute_workflow(Reminder, "bo", id="r-2", task_queue="q") == "pretended to mail bo"


async def test_a_failing_activity_fails_the_workflow_with_its_cause_after_its_attempts():
    @activity.defn(name="send_email")
    async def bounce(to: str) -> str:
        raise ValueError(f"no such mailbox: {to}")

    async with WorkflowEnvironment(workflows=[MailTwice], activities=[bounce]) as env:
        handle = await env.client.start_workflow(MailTwice, "nobody", id="r-3", task_queue="q")
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result(timeout=10)
        attempts = [e for e in await handle.history() if e["type"] == "ActivityTaskAttemptFailed"]
    assert "no such mailbox: nobody" in str(info.value)
    assert len(attempts) == 1  # the first of two attempts; the second's failure fails the activity


async def test_an_activity_failing_for_ever_keeps_retrying_at_the_capped_backoff():
    # the default policy retries without limit: a thousand attempts of virtual time in about a
    # second (the engine's backoff overflowed past attempt 1,025 before; test_activity_retry_delay),
    # once the environment's own bound on attempts (max_activity_attempts, 100) is raised
    @activity.defn(name="send_email")
    async def bounce(to: str) -> str:
        if activity.info().attempt < 1100:
            raise ValueError("mailbox full")
        return "delivered at last"

    async with WorkflowEnvironment(workflows=[Reminder], activities=[bounce], max_activity_attempts=2_000) as env:
        assert (
            await env.client.execute_workflow(Reminder, "z", id="r-5", task_queue="q", result_timeout=60)
            == "delivered at last"
        )


async def test_signals_and_queries_reach_a_waiting_workflow():
    async with WorkflowEnvironment(workflows=[Approval]) as env:
        handle = await env.client.start_workflow(Approval, 2, id="a-1", task_queue="q")
        await handle.signal("approve", "ann")
        assert await handle.query("count") == 1
        await handle.signal("approve", "bo")
        assert await handle.result(timeout=10) == ["ann", "bo"]


async def test_cancel_ends_a_waiting_workflow_canceled():
    async with WorkflowEnvironment(workflows=[Approval]) as env:
        handle = await env.client.start_workflow(Approval, 5, id="a-2", task_queue="q")
        await handle.cancel(reason="test")
        with pytest.raises(WorkflowCanceledError):
            await handle.result(timeout=10)


async def test_a_child_workflow_runs_and_returns_to_its_parent():
    async with WorkflowEnvironment(workflows=[Parent, Sum], activities=[add]) as env:
        assert await env.client.execute_workflow(Parent, 4, id="p-1", task_queue="q") == 6


async def test_sleep_moves_the_clock_and_fires_what_falls_due():
    CALLS.clear()
    async with WorkflowEnvironment(workflows=[Reminder], activities=[send_email]) as env:
        handle = await env.client.start_workflow(Reminder, "cy", id="r-4", task_queue="q")
        await env.sleep(29 * 86400)
        assert CALLS == []  # not due yet
        assert (await handle.describe())["status"] == "running"
        await env.sleep(2 * 86400)
        assert CALLS == ["email cy attempt 1"]
        assert (await handle.describe())["status"] == "completed"


async def test_workflow_code_that_blocks_raises_a_typed_error_naming_the_cause():
    async with WorkflowEnvironment(workflows=[Buggy]) as env:
        handle = await env.client.start_workflow(Buggy, id="b-1", task_queue="q")
        with pytest.raises(WorkflowTaskFailedError) as info:
            await asyncio.wait_for(handle.result(timeout=10), 10)
    assert info.value.workflow_id == "b-1"
    assert info.value.cause == "nondeterministic_call"
    assert "time.sleep" in str(info.value)


async def test_an_unregistered_workflow_type_raises_a_typed_error():
    async with WorkflowEnvironment(workflows=[Sum], activities=[add]) as env:
        handle = await env.client.start_workflow("Nope", id="n-1", task_queue="q")
        with pytest.raises(WorkflowTaskFailedError) as info:
            await handle.result(timeout=10)
    assert info.value.cause == "unknown_workflow_type"


@activity.defn
async def resumable(total: int) -> dict:
    start = activity.info().heartbeat_details or 0
    for i in range(start, total):
        activity.heartbeat(i + 1)
        if i == 2 and activity.info().attempt == 1:
            raise RuntimeError("crashed mid-way")
    return {"attempt": activity.info().attempt, "resumed_from": start}


@workflow.defn
class Resume:
    @workflow.run
    async def run(self, total: int) -> dict:
        return await workflow.execute_activity(
            resumable, total, start_to_close_timeout=T, heartbeat_timeout=timedelta(seconds=5)
        )


async def test_heartbeat_details_reach_the_next_attempt():
    async with WorkflowEnvironment(workflows=[Resume], activities=[resumable]) as env:
        result = await env.client.execute_workflow(Resume, 5, id="h-1", task_queue="q")
    assert result["attempt"] == 2 and result["resumed_from"] >= 1


async def test_terminate_and_a_second_start_of_a_running_workflow():
    async with WorkflowEnvironment(workflows=[Approval]) as env:
        handle = await env.client.start_workflow(Approval, 3, id="t-1", task_queue="q")
        with pytest.raises(WorkflowAlreadyStartedError):
            await env.client.start_workflow(Approval, 3, id="t-1", task_queue="q", id_reuse_policy="reject_duplicate")
        await handle.terminate(reason="test over")
        with pytest.raises(WorkflowTerminatedError) as info:  # a WorkflowFailureError, of its own kind
            await handle.result(timeout=10)
        assert info.value.reason == "test over" and isinstance(info.value, WorkflowFailureError)
        assert (await handle.describe())["status"] == "terminated"


async def test_a_run_past_its_timeout_raises_workflow_timed_out_error():
    async with WorkflowEnvironment(workflows=[Approval]) as env:
        handle = await env.client.start_workflow(
            Approval, 3, id="t-late", task_queue="q", run_timeout=timedelta(hours=2)
        )
        with pytest.raises(WorkflowTimedOutError, match="run timeout") as info:  # two virtual hours, no approval
            await handle.result(timeout=10)
        assert isinstance(info.value, WorkflowFailureError) and info.value.failure["type"] == "TimeoutError"


async def test_reading_history_or_describing_does_not_move_the_clock():
    CALLS.clear()
    async with WorkflowEnvironment(workflows=[Reminder], activities=[send_email]) as env:
        before = env.now()
        handle = await env.client.start_workflow(Reminder, "di", id="r-6", task_queue="q")
        for _ in range(20):
            await handle.history()
            assert (await handle.describe())["status"] == "running"
        assert env.now() - before < timedelta(minutes=1) and CALLS == []


async def test_concurrency_limits_work_in_the_test_environment():
    """Two runs of one max-1 key: the second's code runs only after the first closed."""
    async with WorkflowEnvironment(workflows=[Reminder], activities=[send_email]) as env:
        one = [Limit("inbox", "ann", max=1)]
        first = await env.client.start_workflow(Reminder, "ann", id="l-1", task_queue="mail", concurrency=one)
        second = await env.client.start_workflow(Reminder, "bob", id="l-2", task_queue="mail", concurrency=one)
        assert (await second.describe()).waiting_for_slot == {
            "key": "inbox=ann",
            "max": 1,
            "in_use": 1,
            "waiting": 1,
            "waiting_before": 0,
            "reason": "waiting for a slot of inbox=ann: 1 of 1 in use, 0 waiting before it",
        }
        assert await first.result(timeout=10) == "sent to ann"
        assert await second.result(timeout=10) == "sent to bob"
        first_closed = (await first.history())[-1]["time"]
        second_acquired = next(e for e in await second.history() if e["type"] == "ConcurrencySlotAcquired")
    assert second_acquired["time"] >= first_closed


async def test_rate_limits_work_in_the_test_environment():
    """Three starts of a key limited to one an hour: the later ones wait on virtual time, an
    hour apart, and each run's code runs no earlier than its admission."""
    async with WorkflowEnvironment(workflows=[Reminder], activities=[send_email]) as env:
        hourly = [Limit("digest", "ann", max=1, per=timedelta(hours=1))]
        t0 = env.now()
        handles = [
            await env.client.start_workflow(Reminder, f"u{i}", id=f"h-{i}", task_queue="mail", concurrency=hourly)
            for i in range(3)
        ]
        assert (await handles[2].describe()).throttled_until is not None
        assert [await h.result(timeout=10) for h in handles] == ["sent to u0", "sent to u1", "sent to u2"]
        admitted = []
        for h in handles:
            events = await h.history()
            slot = next(e for e in events if e["type"] == "ConcurrencySlotAcquired")
            first_task = next(e for e in events if e["type"] == "WorkflowTaskScheduled")
            assert first_task["time"] >= slot["time"]
            admitted.append(slot["attributes"]["not_before_ms"])
        assert admitted[1] - admitted[0] == admitted[2] - admitted[1] == 3_600_000
        assert env.now() - t0 >= timedelta(hours=2)
