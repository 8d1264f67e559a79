"""Failure drills of the history processor (docs/architecture.md, "Guarantees, and what tests prove them"), on the real broker."""

import asyncio
import collections
import concurrent.futures

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from kadence import Worker
from tests.integration.conftest import wait_until
from tests.integration.invariants import check_history, histories
from tests.integration.workflows import DOUBLE_OPEN, EFFECTS, ThreeSteps, add, double, three_steps_result


def _assert_all_histories_clean(kafka_config, expected_runs: int) -> None:
    runs = histories(kafka_config)
    assert len(runs) == expected_runs, f"{len(runs)} runs in history, expected {expected_runs}"
    problems = {k: p for k, events in runs.items() if (p := check_history(events))}
    assert not problems, f"history invariants violated: {dict(list(problems.items())[:5])}"


async def test_sigkill_mid_batch_loses_and_duplicates_nothing(client, processors, kafka_config):
    """200 workflows in flight; the processor is SIGKILLed mid-way and restarted."""
    EFFECTS.clear()
    n = 200
    processors.start("p0")
    async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double]):
        handles = await asyncio.gather(
            *(client.start_workflow(ThreeSteps, i, id=f"k-{i}", task_queue="q") for i in range(n))
        )
        results = [asyncio.ensure_future(h.result(timeout=240)) for h in handles]
        await wait_until(lambda: sum(EFFECTS.values()) >= 3 * n // 3, 120, "a third of the activities")
        processors.kill("p0")
        done_at_kill = sum(r.done() for r in results)
        assert done_at_kill < n, "every workflow finished before the kill: the drill proved nothing"
        processors.start("p0")
        values = await asyncio.gather(*results)
    assert values == [three_steps_result(i) for i in range(n)]
    _assert_all_histories_clean(kafka_config, n)
    # every activity's business effect happened exactly once (no task re-emitted after the abort)
    assert len(EFFECTS) == 3 * n
    assert collections.Counter(EFFECTS.values()) == {1: 3 * n}


_COORDINATOR_MOVING = frozenset(
    {KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE}
)


def _members(config) -> dict[str, list[int]]:
    """Each member's partitions; none while the broker's group coordinator is still loading (a
    fresh broker: COORDINATOR_LOAD_IN_PROGRESS, or no answer yet), which the waits poll through."""
    admin = AdminClient(config.base())
    group = f"{config.namespace}.processor"
    try:
        desc = admin.describe_consumer_groups([group])[group].result(10)
    except concurrent.futures.TimeoutError:
        return {}
    except KafkaException as exc:
        if exc.args and (exc.args[0].retriable() or exc.args[0].code() in _COORDINATOR_MOVING):
            return {}
        raise
    return {
        m.client_id.rsplit(".", 1)[-1]: sorted(tp.partition for tp in m.assignment.topic_partitions)
        for m in desc.members
    }


async def _failover(client, processors, kafka_config, how: str) -> None:
    EFFECTS.clear()
    DOUBLE_OPEN.clear()
    n = 100
    processors.start("p0")
    processors.start("p1")
    # both instances own shards before the load starts
    await wait_until(
        lambda: len([p for p in _members(kafka_config).values() if p]) == 2,
        60,
        "two processor instances sharing the partitions",
    )
    async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double]):
        handles = await asyncio.gather(
            *(client.start_workflow(ThreeSteps, i, id=f"f-{i}", task_queue="q") for i in range(n))
        )
        results = [asyncio.ensure_future(h.result(timeout=240)) for h in handles]
        # every workflow held at its second step when the fault comes (unheld, a fast machine
        # finished them all between two polls of the wait below: the drill proved nothing)
        await wait_until(lambda: sum(EFFECTS.values()) >= n, 120, "every first activity")
        getattr(processors, how)("p1")
        assert sum(r.done() for r in results) == 0
        DOUBLE_OPEN.set()
        values = await asyncio.gather(*results)
    assert values == [three_steps_result(i) for i in range(n)]
    # a killed member is removed from the group only when its session times out (6 s; a stopped
    # one leaves at once): if every workflow left was on the survivor's shards, they completed before that
    await wait_until(
        lambda: list(_members(kafka_config).values()) == [[0, 1, 2, 3]], 30, "the survivor owning every shard"
    )
    _assert_all_histories_clean(kafka_config, n)
    assert collections.Counter(EFFECTS.values()) == {1: 3 * n}


async def test_stopping_one_of_two_processors_moves_its_shards(client, processors, kafka_config):
    try:
        await _failover(client, processors, kafka_config, "stop")
    finally:
        DOUBLE_OPEN.set()  # never left holding another test's activities


async def test_sigkill_of_one_of_two_processors_moves_its_shards(client, processors, kafka_config):
    try:
        await _failover(client, processors, kafka_config, "kill")
    finally:
        DOUBLE_OPEN.set()


async def test_two_processes_given_one_instance_id_write_nothing_twice(client, processors, kafka_config):
    """A misconfiguration: two running processes with the same instance ID (so the same
    transactional ID). They are two group members with shards of their own, and each new producer
    fences the other's: every workflow still completes once, each effect happens once, neither
    process exits, and the fenced one says what is wrong (docs/deploy.md)."""
    EFFECTS.clear()
    n = 40
    procs = {name: processors.start(name, env={"KADENCE_PROCESSOR_ID": "same"}) for name in ("first", "second")}
    await wait_until(
        lambda: sum(1 for shards in _member_shards(kafka_config) if shards) == 2, 60, "both processes owning shards"
    )
    async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double]):
        handles = [await client.start_workflow(ThreeSteps, i, id=f"same-{i}", task_queue="q") for i in range(n)]
        values = await asyncio.gather(*(h.result(timeout=180) for h in handles))
    assert values == [three_steps_result(i) for i in range(n)]
    _assert_all_histories_clean(kafka_config, n)
    assert collections.Counter(EFFECTS.values()) == {1: 3 * n}
    assert {name: proc.poll() for name, proc in procs.items()} == {"first": None, "second": None}
    logs = "".join(p.read_text() for p in processors.logdir.glob("processor-*.log"))
    assert "another running process has the same instance ID" in logs


def _member_shards(config) -> list[list[int]]:
    """Each member's shards (members named alike are kept apart)."""
    admin = AdminClient(config.base())
    group = f"{config.namespace}.processor"
    desc = admin.describe_consumer_groups([group])[group].result(10)
    return [sorted(tp.partition for tp in m.assignment.topic_partitions) for m in desc.members]
