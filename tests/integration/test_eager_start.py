"""Eager workflow start on the broker (issue 45 item 1): with ``request_eager_start=True`` and a
worker of the same client serving the queue, the first workflow task runs before the start is
sent and the engine records both in one transaction. A workflow of local activities then
completes without the engine dispatching any workflow task; a workflow with an activity goes on
with the worker's cached instance (confirmed by the engine's record of the task); a start the
engine refuses (the ID in use) leaves no trace of the task and the worker drops its instance."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from kadence import Worker, WorkflowAlreadyStartedError, WorkflowNotFoundError, activity, workflow
from kadence._eager_start import run_first_task
from kadence.topics.protocol import start_body
from kadence.topics.records import new_id, start_run_id

QUEUE = "eager-start"


@activity.defn
async def add_one(x: int) -> int:
    return x + 1


@workflow.defn
class LocalSteps:
    @workflow.run
    async def run(self, x: int) -> int:
        for _ in range(3):
            x = await workflow.execute_local_activity(add_one, x, start_to_close_timeout=timedelta(seconds=10))
        return x


@workflow.defn
class OneActivity:
    def __init__(self) -> None:
        self.go = False

    @workflow.signal
    def release(self) -> None:
        self.go = True

    @workflow.run
    async def run(self, x: int) -> int:
        x = await workflow.execute_activity(add_one, x, start_to_close_timeout=timedelta(seconds=10))
        await workflow.wait_condition(lambda: self.go)
        return x


def _kinds(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


async def test_a_workflow_of_local_activities_is_recorded_with_its_start(client, processors):
    processors.start()
    async with Worker(client, task_queue=QUEUE, workflows=[LocalSteps], activities=[add_one]) as worker:
        await worker.wait_started(60)  # an eager start needs a serving worker
        result = await client.execute_workflow(
            LocalSteps, 1, id="eager-local", task_queue=QUEUE, request_eager_start=True, result_timeout=30
        )
        assert result == 4
        events = await client.get_workflow_handle("eager-local").history()
        assert _kinds(events) == [
            "WorkflowExecutionStarted",
            "WorkflowTaskScheduled",
            "WorkflowTaskCompleted",
            "MarkerRecorded",
            "MarkerRecorded",
            "MarkerRecorded",
            "WorkflowExecutionCompleted",
        ]
        assert events[2]["attributes"]["identity"] == "eager start"
        assert worker.stats["eager_starts"] == 1 and worker.stats["workflow_tasks"] == 0  # none dispatched


async def test_an_eager_run_goes_on_with_the_workers_instance(client, processors):
    processors.start()
    async with Worker(client, task_queue=QUEUE, workflows=[OneActivity], activities=[add_one]) as worker:
        await worker.wait_started(60)  # an eager start needs a serving worker
        handle = await client.start_workflow(OneActivity, 1, id="eager-act", task_queue=QUEUE, request_eager_start=True)
        async with asyncio.timeout(30):  # the activity's result (and the eager task it carried) first
            while "WorkflowTaskCompleted" not in _kinds(await handle.history())[3:]:
                await asyncio.sleep(0.05)
        await handle.signal(OneActivity.release)
        assert await handle.result(timeout=30) == 2
        assert worker.stats["eager_starts"] == 1
        # the engine recorded the eager task: the cached instance went on, no full history was asked for
        assert worker.stats["eager_discarded"] == 0 and worker.stats["history_requests"] == 0, dict(worker.stats)
        kinds = _kinds(await handle.history())
        assert kinds[:4] == [
            "WorkflowExecutionStarted",
            "WorkflowTaskScheduled",
            "WorkflowTaskCompleted",
            "ActivityTaskScheduled",
        ]


async def test_a_start_the_engine_refuses_drops_the_eager_task(client, processors):
    processors.start()
    async with Worker(client, task_queue=QUEUE, workflows=[OneActivity], activities=[add_one]) as worker:
        await worker.wait_started(60)  # an eager start needs a serving worker
        first = await client.start_workflow(OneActivity, 10, id="eager-dup", task_queue=QUEUE)
        async with asyncio.timeout(30):  # the first run waits for its signal: nothing of it in flight
            while "WorkflowTaskCompleted" not in _kinds(await first.history())[3:]:
                await asyncio.sleep(0.05)
        with pytest.raises(WorkflowAlreadyStartedError):
            await client.start_workflow(
                OneActivity,
                20,
                id="eager-dup",
                task_queue=QUEUE,
                id_reuse_policy="reject_duplicate",
                request_eager_start=True,
            )
        assert worker.stats["eager_starts"] == 1 and worker.stats["eager_discarded"] == 1
        await first.signal(OneActivity.release)
        assert await first.result(timeout=30) == 11  # the running run, untouched
        assert _kinds(await first.history()).count("WorkflowExecutionStarted") == 1


async def test_without_a_worker_of_the_client_the_start_is_an_ordinary_one(client, processors):
    processors.start()
    handle = await client.start_workflow(LocalSteps, 5, id="eager-none", task_queue=QUEUE, request_eager_start=True)
    async with Worker(client, task_queue=QUEUE, workflows=[LocalSteps], activities=[add_one]) as worker:
        assert await handle.result(timeout=30) == 8
        assert worker.stats["eager_starts"] == 0 and worker.stats["workflow_tasks"] == 1


async def test_a_retried_eager_start_answers_the_first_run(client, processors):
    processors.start()
    async with Worker(client, task_queue=QUEUE, workflows=[LocalSteps], activities=[add_one]):
        one = await client.start_workflow(
            LocalSteps, 1, id="eager-retry", task_queue=QUEUE, request_id="r-1", request_eager_start=True
        )
        two = await client.start_workflow(
            LocalSteps, 1, id="eager-retry", task_queue=QUEUE, request_id="r-1", request_eager_start=True
        )
        assert one.run_id == two.run_id
        assert await two.result(timeout=30) == 4
        assert _kinds(await one.history()).count("WorkflowExecutionStarted") == 1


async def test_a_client_that_dies_before_sending_leaves_nothing_and_racing_starts_make_one_run(client, processors):
    """A client that ran the first task and died before the start left Kafka (its worker kept an
    instance the engine never heard of); then an eager and an ordinary start of one ID race:
    exactly one run, recorded once, and the loser is told the ID is in use."""
    processors.start()
    async with Worker(client, task_queue=QUEUE, workflows=[OneActivity], activities=[add_one]) as worker:
        await worker.wait_started(60)
        body = start_body("OneActivity", QUEUE, client.converter.to_bytes([1]))
        eager = await run_first_task(worker, "eager-race", start_run_id(new_id()), body, new_id())
        assert eager is not None  # ... and the start is never sent: the "crash"
        with pytest.raises(WorkflowNotFoundError):  # nothing of it reached the engine
            await client.get_workflow_handle("eager-race").describe()
        results = await asyncio.gather(
            client.start_workflow(
                OneActivity,
                2,
                id="eager-race",
                task_queue=QUEUE,
                id_reuse_policy="reject_duplicate",
                request_eager_start=True,
            ),
            client.start_workflow(
                OneActivity, 3, id="eager-race", task_queue=QUEUE, id_reuse_policy="reject_duplicate"
            ),
            return_exceptions=True,
        )
        started = [r for r in results if not isinstance(r, BaseException)]
        refused = [r for r in results if isinstance(r, WorkflowAlreadyStartedError)]
        assert len(started) == 1 and len(refused) == 1, results
        handle = started[0]
        await handle.signal(OneActivity.release)
        assert await handle.result(timeout=30) in (3, 4)
        events = await handle.history()
        assert _kinds(events).count("WorkflowExecutionStarted") == 1
        assert _kinds(events).count("ActivityTaskScheduled") == 1
