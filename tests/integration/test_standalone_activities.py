"""Standalone activities on the real broker (issue 47 item 3, decision 0063): an activity a client
starts by its own ID, with no workflow. A retried activity gives one stable result to two
callers; a second start with the same ID follows the conflict and reuse policies; heartbeats,
cancel, terminate, describe and async completion work as a workflow's activity's do."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from kadence import (
    ActivityAlreadyStartedError,
    ActivityExecutionError,
    ActivityFailedError,
    ActivityNotFoundError,
    CommandRejectedError,
    RetryPolicy,
    Worker,
    activity,
    workflow,
)

T = timedelta(seconds=30)
FAST = RetryPolicy(initial_interval=timedelta(milliseconds=100))
QUEUE = "standalone"

runs: list[tuple[str, int, bool]] = []
cancelled: list[str] = []
tokens: dict[str, bytes] = {}


@activity.defn
async def charge(order: str, amount: int) -> dict:
    info = activity.info()
    runs.append((order, info.attempt, info.standalone))
    if info.attempt < 3:
        raise RuntimeError(f"gateway busy (attempt {info.attempt})")
    return {"order": order, "charged": amount, "attempt": info.attempt}


@activity.defn
async def watch(name: str) -> str:
    try:
        while True:
            activity.heartbeat("watching")
            await asyncio.sleep(0.2)
    except asyncio.CancelledError:
        cancelled.append(name)
        raise


@activity.defn
async def approve(name: str) -> str:
    tokens[name] = activity.info().task_token
    activity.raise_complete_async()


@workflow.defn
class Noop:
    @workflow.run
    async def run(self) -> None:
        return None


def _worker(client):
    return Worker(client, task_queue=QUEUE, activities=[charge, watch, approve])


async def test_a_retried_activity_gives_one_stable_result_to_two_callers(client, processors):
    processors.start()
    processors.start_timers()
    async with _worker(client):
        handle = await client.start_activity(
            charge, "o-1", 42, id="charge-o-1", task_queue=QUEUE, start_to_close_timeout=T, retry_policy=FAST
        )
        other = client.get_activity_handle("charge-o-1")
        first, second = await asyncio.gather(handle.result(timeout=60), other.result(timeout=60))
        assert first == second == {"order": "o-1", "charged": 42, "attempt": 3}
        assert [r for r in runs if r[0] == "o-1"] == [("o-1", 1, True), ("o-1", 2, True), ("o-1", 3, True)]
        # once more, later, from the history: the same result, and one completion recorded
        assert await client.get_activity_handle("charge-o-1").result(timeout=30) == first
        kinds = [e["type"] for e in await handle.history()]
        assert kinds.count("ActivityTaskCompleted") == 1 and kinds.count("ActivityTaskAttemptFailed") == 2
        assert "WorkflowTaskScheduled" not in kinds and kinds[-1] == "WorkflowExecutionCompleted"
        described = await handle.describe()
        assert described.status.value == "completed"
        # execute_activity: start and result in one call
        assert (
            await client.execute_activity(
                charge, "o-2", 7, id="charge-o-2", task_queue=QUEUE, start_to_close_timeout=T, retry_policy=FAST
            )
        )["charged"] == 7


async def test_a_second_start_follows_the_conflict_and_reuse_policies(client, processors):
    processors.start()
    processors.start_timers()
    opts = {"task_queue": QUEUE, "start_to_close_timeout": T, "heartbeat_timeout": timedelta(seconds=5)}
    async with _worker(client):
        first = await client.start_activity(watch, "w-1", id="watch-1", **opts)
        with pytest.raises(ActivityAlreadyStartedError) as refused:
            await client.start_activity(watch, "w-1", id="watch-1", **opts)
        assert refused.value.run_id == first.run_id
        same = await client.start_activity(watch, "w-1", id="watch-1", id_conflict_policy="use_existing", **opts)
        assert same.run_id == first.run_id
        described = await first.describe()
        assert described.status.value == "running" and described.pending_activities[0].attempt == 1
        replaced = await client.start_activity(
            watch, "w-1", id="watch-1", id_conflict_policy="terminate_existing", **opts
        )
        assert replaced.run_id != first.run_id
        with pytest.raises(ActivityFailedError) as ended:
            await first.result(timeout=30)
        assert ended.value.status == "terminated"
        await replaced.terminate(reason="done")
        with pytest.raises(ActivityAlreadyStartedError):
            await client.start_activity(watch, "w-1", id="watch-1", id_reuse_policy="reject_duplicate", **opts)
        # a terminated run counts as failed (as in Temporal): allow_duplicate_failed_only starts anew
        again = await client.start_activity(
            watch, "w-1", id="watch-1", id_reuse_policy="allow_duplicate_failed_only", **opts
        )
        assert again.run_id not in (first.run_id, replaced.run_id)
        await again.terminate()


async def test_cancel_reaches_the_attempt_at_its_heartbeat_and_closes_the_run_canceled(client, processors):
    processors.start()
    processors.start_timers()
    async with _worker(client):
        handle = await client.start_activity(
            watch,
            "w-2",
            id="watch-2",
            task_queue=QUEUE,
            start_to_close_timeout=T,
            heartbeat_timeout=timedelta(seconds=5),
        )
        await asyncio.sleep(0.5)  # (it runs and heartbeats; the cancel does not depend on it)
        await handle.cancel(reason="no longer needed")
        with pytest.raises(ActivityFailedError) as ended:
            await handle.result(timeout=30)
        assert ended.value.status == "canceled"
        for _ in range(50):  # the attempt learns it at its next heartbeat
            if "w-2" in cancelled:
                break
            await asyncio.sleep(0.1)
        assert "w-2" in cancelled
        with pytest.raises(
            ActivityExecutionError, match="cancel of standalone activity 'watch-2' rejected: activity is canceled"
        ):
            await handle.cancel()


async def test_async_completion_and_the_typed_errors(client, processors):
    processors.start()
    processors.start_timers()
    async with _worker(client):
        handle = await client.start_activity(approve, "a-1", id="approve-1", task_queue=QUEUE, start_to_close_timeout=T)
        for _ in range(100):
            if "a-1" in tokens:
                break
            await asyncio.sleep(0.1)
        await client.get_async_activity_handle(tokens["a-1"]).complete("approved by Ann")
        assert await handle.result(timeout=30) == "approved by Ann"
    with pytest.raises(ActivityNotFoundError):
        await client.get_activity_handle("never-started").result(timeout=10)
    # the prefix belongs to activities: a workflow start may not take it
    with pytest.raises(CommandRejectedError, match="standalone activities"):
        await client.start_workflow(Noop, id="kadence-activity:approve-1", task_queue=QUEUE)
