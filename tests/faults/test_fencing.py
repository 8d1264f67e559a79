"""A stale owner of a shard writes nothing (issue 15), on the real broker.

Each test gives one partition to processor p0 with p1 standing by, stops p0 with SIGSTOP past its
session timeout while it holds work of its own making (an activity deadline that falls due), lets
p1 take the shard over and act on that work, then wakes p0. A zombie that still commits would leave
the deadline's event twice in the history and its stale state record after the new owner's on the
compacted state topic (the next restore would start from it).
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from datetime import timedelta

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from kadence import Client, RetryPolicy, Worker, activity, workflow
from kadence.topics import Catalogue, KafkaConfig
from tests.integration.conftest import ProcessorProcs, wait_until
from tests.integration.invariants import check_history, histories, read_topic

STC = timedelta(seconds=5)
#: attempt -> time.monotonic() when the worker began it
STARTED: dict[int, float] = {}


@activity.defn
async def outlives(tag: str) -> str:
    """The first attempt outlives its start-to-close timeout; the second answers at once."""
    attempt = activity.info().attempt
    STARTED[attempt] = time.monotonic()
    if attempt == 1:
        await asyncio.sleep(60)
    return f"{tag}:{attempt}"


@workflow.defn(name="Outliver")
class Outliver:
    @workflow.run
    async def run(self, tag: str) -> str:
        return await workflow.execute_activity(
            outlives,
            tag,
            start_to_close_timeout=STC,
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=2),
        )


def _one_shard(bootstrap, tmp_path):
    config = KafkaConfig(bootstrap=bootstrap, namespace=f"t{uuid.uuid4().hex[:10]}", partitions=1)
    Catalogue(config).apply()
    procs = ProcessorProcs(config, tmp_path)
    try:
        yield config, procs
    finally:
        for proc in procs.procs.values():  # a test that failed half-way may leave one stopped
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
        procs.close()


@pytest.fixture
def one_shard(kafka_bootstrap, tmp_path):
    yield from _one_shard(kafka_bootstrap, tmp_path)


@pytest.fixture
def one_shard_own_broker(own_broker, tmp_path):
    """One shard on a broker of the test's own (the test pauses it)."""
    for config, procs in _one_shard(own_broker.bootstrap, tmp_path):
        yield config, procs, own_broker


def _owner(config: KafkaConfig) -> dict[str, list[int]]:
    admin = AdminClient(config.base())
    group = f"{config.namespace}.processor"
    try:
        desc = admin.describe_consumer_groups([group])[group].result(10)
    except (KafkaException, TimeoutError):  # coordinator loading, or slow on a loaded machine: ask again
        return {}
    return {
        m.client_id.rsplit(".", 1)[-1]: sorted(tp.partition for tp in m.assignment.topic_partitions)
        for m in desc.members
    }


def _log(procs: ProcessorProcs, instance: str) -> str:
    return "\n".join(p.read_text() for p in sorted(procs.logdir.glob(f"processor-{instance}-*.log")))


async def _two_processors(config, procs) -> None:
    procs.start("p0")
    await wait_until(lambda: _owner(config).get("p0") == [0], 60, "p0 owning the shard")
    procs.start("p1")
    await wait_until(
        lambda: _owner(config).get("p1") == [] and _owner(config).get("p0") == [0],
        60,
        "p1 standing by while p0 keeps the shard",
    )


async def _standby_takes_over_then_owner_wakes(config, procs, owner, handle, result: str) -> None:
    """With the owner p0 stopped: p1 takes the shard, fires the deadline, and attempt 2 completes
    the workflow; then p0 is woken and must give up its shard (released) without exiting."""
    try:
        await wait_until(lambda: _owner(config).get("p1") == [0], 60, "p1 taking the shard over")
        assert await handle.result(timeout=60) == result
    finally:
        owner.send_signal(signal.SIGCONT)
    await wait_until(lambda: "released partitions [0]" in _log(procs, "p0"), 60, "the woken owner giving up its shard")
    assert owner.poll() is None, "the woken owner exited instead of giving up its shard"


def _deadline_ms(config: KafkaConfig, workflow_id: str) -> int:
    """When the processor's start-to-close deadline of the workflow's running attempt falls due."""
    states = [
        v for k, v, _p, _o in read_topic(config, Catalogue(config).state, "WorkflowState") if k == workflow_id.encode()
    ]
    (act,) = states[-1]["pending_activities"]
    return act["attempt_started_ms"] + int(STC.total_seconds() * 1000)


async def _until_epoch_ms(at_ms: int) -> None:
    await asyncio.sleep(max(0.0, at_ms / 1000 - time.time()))


def _assert_clean(config: KafkaConfig, workflow_id: str) -> None:
    runs = {k: v for k, v in histories(config).items() if k[0] == workflow_id}
    assert len(runs) == 1, runs.keys()
    (events,) = runs.values()
    problems = check_history(events)
    failed = [e["attributes"][1].get("attempt") for e in events if e["attributes"][0] == "ActivityTaskAttemptFailed"]
    assert not problems, problems
    assert failed == [1], f"attempt 1 failed {len(failed)} times in the history: {failed}"
    states = [
        v for k, v, _p, _o in read_topic(config, Catalogue(config).state, "WorkflowState") if k == workflow_id.encode()
    ]
    assert states and states[-1]["status"] == "completed", (
        f"the last state record is {states[-1]['status'] if states else None}: a stale owner wrote after the new one"
    )


async def test_paused_owner_with_a_due_deadline_writes_nothing(one_shard):
    config, procs = one_shard
    STARTED.clear()
    await _two_processors(config, procs)
    procs.start_timers()
    client = await Client.connect(config=config)
    try:
        async with Worker(client, task_queue="q", workflows=[Outliver], activities=[outlives]):
            handle = await client.start_workflow(Outliver, "x", id="zombie-deadline", task_queue="q")
            await wait_until(lambda: 1 in STARTED, 30, "attempt 1 running")
            # stop the owner while its deadline is still ahead: it holds the deadline in its index
            await asyncio.sleep(max(0.0, STARTED[1] + STC.total_seconds() - 1.5 - time.monotonic()))
            owner = procs.procs["p0"]
            owner.send_signal(signal.SIGSTOP)
            # the woken owner fires the same deadline from its stale index, then learns it lost the shard
            await _standby_takes_over_then_owner_wakes(config, procs, owner, handle, "x:2")
    finally:
        await client.close()
    _assert_clean(config, "zombie-deadline")


async def test_owner_paused_with_its_deadline_commit_in_flight_is_fenced(one_shard_own_broker):
    """The issue's reproduction: the broker stops 0.15 s before the deadline, so the owner's
    deadline-only transaction is caught in flight; the owner stops 0.25 s after it; the broker
    resumes and the standby takes the shard over (no consumer offsets are pending, so nothing makes
    it wait), fires the same deadline and completes the workflow; then the owner wakes with its
    transaction open. Before the fix its commit completed (3 of 3 runs)."""
    config, procs, broker = one_shard_own_broker
    STARTED.clear()
    await _two_processors(config, procs)
    procs.start_timers()
    client = await Client.connect(config=config)
    try:
        async with Worker(client, task_queue="q", workflows=[Outliver], activities=[outlives]):
            handle = await client.start_workflow(Outliver, "y", id="zombie-in-flight", task_queue="q")
            await wait_until(lambda: 1 in STARTED, 30, "attempt 1 running")
            due = _deadline_ms(config, "zombie-in-flight")
            owner = procs.procs["p0"]
            await _until_epoch_ms(due - 150)
            broker.proc.send_signal(signal.SIGSTOP)
            try:
                await _until_epoch_ms(due + 250)
                owner.send_signal(signal.SIGSTOP)
            finally:
                broker.proc.send_signal(signal.SIGCONT)
            await _standby_takes_over_then_owner_wakes(config, procs, owner, handle, "y:2")
            assert "deadline passed" in _log(procs, "p0"), (
                "the owner never fired the deadline: the drill proved nothing"
            )
            assert "transaction failed" in _log(procs, "p0"), "the owner's open transaction was not refused"
    finally:
        await client.close()
    _assert_clean(config, "zombie-in-flight")
