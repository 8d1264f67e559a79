"""Eager workflow start on the broker (issue 45 item 1): with ``request_eager_start=True`` and a
worker of the same client serving the queue, the first workflow task runs before the start is
sent and the engine records both in one transaction. A workflow of local activities then
completes without the engine dispatching any workflow task; a workflow with an activity goes on
with the worker's cached instance (confirmed by the engine's record of the task); a start the
engine refuses (the ID in use) leaves no trace of the task and the worker drops its instance."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import pytest

from kadence import Worker, WorkflowAlreadyStartedError, WorkflowNotFoundError, activity, workflow
from kadence.gateway import GatewayConfig, create_app
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
        eager = await worker.run_first_task("eager-race", start_run_id(new_id()), body, new_id())
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


async def test_through_the_gateway_with_a_worker_in_its_process(client, processors, kafka_config):
    """The gateway's start with ``request_eager_start`` runs the first task on the worker given
    to ``create_app``: one transaction for a workflow of local activities; a retry with the same
    Idempotency-Key answers the first run (and the task run again for it is dropped); without
    the flag the start is an ordinary one."""
    processors.start()
    async with Worker(client, task_queue=QUEUE, workflows=[LocalSteps], activities=[add_one]) as worker:
        await worker.wait_started(60)
        app = create_app(
            GatewayConfig(kafka=kafka_config, auth=False, reply_timeout=30.0),
            engine=client.engine,
            eager_starters=[worker],
        )
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway", timeout=60) as http:
            start = {"workflow_id": "eager-http", "task_queue": QUEUE, "input": [1], "request_eager_start": True}
            first = await http.post(
                "/v1/workflows/LocalSteps/start", json={**start, "wait_seconds": 30}, headers={"Idempotency-Key": "k-1"}
            )
            assert first.status_code == 201, first.text
            assert first.json()["status"] == "completed" and first.json()["result"] == 4
            again = await http.post(
                "/v1/workflows/LocalSteps/start", json={**start, "wait_seconds": 30}, headers={"Idempotency-Key": "k-1"}
            )
            assert again.status_code == 201 and again.json()["run_id"] == first.json()["run_id"], again.text
            plain = await http.post(
                "/v1/workflows/LocalSteps/start",
                json={"workflow_id": "plain-http", "task_queue": QUEUE, "input": [5], "wait_seconds": 30},
            )
            assert plain.status_code == 201 and plain.json()["result"] == 8, plain.text
        events = await client.get_workflow_handle("eager-http").history()
        assert _kinds(events).count("WorkflowExecutionStarted") == 1
        assert events[2]["type"] == "WorkflowTaskCompleted" and events[2]["attributes"]["identity"] == "eager start"
        plain_events = await client.get_workflow_handle("plain-http").history()
        assert plain_events[2]["attributes"]["identity"] != "eager start"
        # the retry's task was run too (for a run the engine never recorded: its run closed in
        # that task, so no instance was kept); the plain start's task came from the engine
        assert worker.stats["eager_starts"] == 2, dict(worker.stats)
        assert worker.stats["workflow_tasks"] == 1, dict(worker.stats)
