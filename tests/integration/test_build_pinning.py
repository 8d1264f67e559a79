"""Build-ID pinning on the real broker (issue #4; docs/upgrading.md: a deployment removes an
old workflow version: tasks for the missing build are visible as lag on that build, not lost).

Two builds of the same workflow type run at once: workflows started while A was the default
finish on A, those started after B was promoted run on B. With A's workers stopped, a workflow
of A waits, visible as backlog on build A (the processor's metric and `kadence builds list`), and
finishes when a worker of A returns.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

from kadence import Worker, activity, workflow
from kadence.topics.backlog import build_backlogs
from tests.support.cli import kadence
from tests.support.metrics import sample_value_async
from tests.support.net import free_port

from .conftest import wait_until

T = timedelta(seconds=30)
Q = "orders"


@activity.defn
async def stamp(value: str) -> str:
    return f"stamped:{value}"


@workflow.defn(name="Shipment")
class ShipmentA:
    """Build A's code."""

    def __init__(self):
        self.go = None

    @workflow.signal
    def release(self, value: str):
        self.go = value

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.go is not None)
        return "A:" + await workflow.execute_activity(stamp, self.go, start_to_close_timeout=T)


@workflow.defn(name="Shipment")
class ShipmentB:
    """Build B's code: not replay-compatible with A (another activity order), so only B may run it."""

    def __init__(self):
        self.go = None

    @workflow.signal
    def release(self, value: str):
        self.go = value

    @workflow.run
    async def run(self) -> str:
        first = await workflow.execute_activity(stamp, "b", start_to_close_timeout=T)
        await workflow.wait_condition(lambda: self.go is not None)
        return "B:" + first + "+" + await workflow.execute_activity(stamp, self.go, start_to_close_timeout=T)


async def _metric_async(port, name, build):
    return await sample_value_async(port, name, build=build, task_queue=Q)


async def _gauge_is(port, name, build, value) -> bool:
    return await _metric_async(port, name, build) == value


async def _drained(config, build: str) -> bool:
    b = await _backlog(config, build)
    return b is not None and b.backlog == 0


async def _backlog(config, build: str):
    rows = await asyncio.get_running_loop().run_in_executor(None, build_backlogs, config, Q)
    return next((b for b in rows if b.build_id == build), None)


async def _waiting_on(config, build: str):
    b = await _backlog(config, build)
    return b if b is not None and b.backlog >= 1 else None


async def _completed_by(handle) -> list:
    return [e["attributes"]["build_id"] for e in await handle.history() if e["type"] == "WorkflowTaskCompleted"]


async def test_two_builds_at_once_and_a_missing_build_shows_as_backlog(client, processors, kafka_config):
    port = free_port()
    processors.start(env={"KADENCE_PROCESSOR_METRICS_PORT": str(port), "KADENCE_BUILD_BACKLOG_INTERVAL_S": "1"})
    worker_a = Worker(client, task_queue=Q, workflows=[ShipmentA], activities=[stamp], build_id="A", promote=True)
    await worker_a.__aenter__()
    # the processor reads {ns}.builds on its own: wait until it has seen the promotion
    await wait_until(lambda: _metric_async(port, "kadence_build_default", "A"), 30, "build A to be the default")
    old = [await client.start_workflow("Shipment", id=f"old-{i}", task_queue=Q) for i in range(4)]

    async with Worker(client, task_queue=Q, workflows=[ShipmentB], activities=[stamp], build_id="B", promote=True):
        await wait_until(lambda: _metric_async(port, "kadence_build_default", "B"), 30, "build B to be the default")
        new = [await client.start_workflow("Shipment", id=f"new-{i}", task_queue=Q) for i in range(3)]
        for h in old[:3] + new:
            await h.signal("release", h.id)
        for h in old[:3]:
            assert await h.result(timeout=60) == f"A:stamped:{h.id}"
            assert set(await _completed_by(h)) == {"A"}
        for h in new:
            assert await h.result(timeout=60) == f"B:stamped:b+stamped:{h.id}"
            assert set(await _completed_by(h)) == {"B"}

        # build A's workers go away while old-3 (pinned to A) still runs
        await worker_a.__aexit__(None, None, None)
        await old[3].signal("release", "late")
        waiting = await wait_until(lambda: _waiting_on(kafka_config, "A"), 30, "a backlog on build A")
        assert waiting.backlog == 1 and not waiting.is_default and waiting.oldest_age_s is not None
        # the gauge is sampled every second: a sample taken while build A's last offsets were
        # still being committed counted its finished tasks too (2 or 3 under load, CI of this
        # session); it must come to the backlog itself
        await wait_until(
            lambda: _gauge_is(port, "kadence_build_backlog", "A", 1), 30, "the backlog gauge of build A at 1"
        )
        rc, out, err = await kadence(kafka_config, "builds", "list", Q, "--json", "--count-open")
        assert rc == 0, err
        rows = {r["build_id"]: r for r in json.loads(out)}
        assert rows["A"]["backlog"] == 1 and rows["A"]["open_workflows"] == 1 and not rows["A"]["default"]
        assert rows["B"]["backlog"] == 0 and rows["B"]["default"] and rows["B"]["open_workflows"] == 0
        # B's workers are running, and the workflow is not lost: it waits for its build
        assert (await old[3].describe())["status"] == "running"
        assert (await _backlog(kafka_config, "B")).backlog == 0

        async with Worker(client, task_queue=Q, workflows=[ShipmentA], activities=[stamp], build_id="A"):
            assert await old[3].result(timeout=60) == "A:stamped:late"
        assert set(await _completed_by(old[3])) == {"A"}
        # the worker commits past the task (auto-commit, about a second), and the gauge follows
        await wait_until(lambda: _drained(kafka_config, "A"), 30, "build A's backlog to drain")
        await wait_until(lambda: _gauge_is(port, "kadence_build_backlog", "A", 0), 30, "the gauge of build A back to 0")


@workflow.defn(name="Stamp")
class Stamp:
    @workflow.run
    async def run(self, value: str) -> str:
        return await workflow.execute_activity(stamp, value, start_to_close_timeout=T)


async def test_an_idle_worker_commits_at_once_so_its_finished_tasks_are_not_backlog(
    client, processors, kafka_config, monkeypatch
):
    # Auto-commit far away: only the idle commit can bring the committed offset to the tasks the
    # worker finished (before, ``builds list`` right after a run counted up to a second of them)
    from kadence._task_consumer import TaskConsumer as _TaskConsumer

    monkeypatch.setattr(_TaskConsumer, "AUTO_COMMIT_MS", 600_000)
    processors.start()
    async with Worker(client, task_queue=Q, workflows=[Stamp], activities=[stamp]):
        for i in range(3):
            h = await client.start_workflow("Stamp", f"v{i}", id=f"idle-{i}", task_queue=Q)
            assert await h.result(timeout=60) == f"stamped:v{i}"
        await wait_until(lambda: _drained(kafka_config, None), 20, "the unversioned backlog to read 0")
