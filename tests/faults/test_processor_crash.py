"""Failure drills of the history processor (DESIGN.md section 12), on the real broker."""

import asyncio
import collections

from confluent_kafka.admin import AdminClient

from kadence import Worker
from tests.integration.conftest import wait_until
from tests.integration.invariants import check_history, histories
from tests.integration.workflows import EFFECTS, ThreeSteps, add, double, three_steps_result


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
        handles = await asyncio.gather(*(client.start_workflow(ThreeSteps, i, id=f"k-{i}", task_queue="q")
                                         for i in range(n)))
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


def _members(config) -> dict[str, list[int]]:
    admin = AdminClient(config.base())
    group = f"{config.namespace}.processor"
    desc = admin.describe_consumer_groups([group])[group].result(10)
    return {m.client_id.rsplit(".", 1)[-1]: sorted(tp.partition for tp in m.assignment.topic_partitions)
            for m in desc.members}


async def _failover(client, processors, kafka_config, how: str) -> None:
    EFFECTS.clear()
    n = 100
    processors.start("p0")
    processors.start("p1")
    # both instances own shards before the load starts
    await wait_until(lambda: len([p for p in _members(kafka_config).values() if p]) == 2, 60,
                     "two processor instances sharing the partitions")
    async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double]):
        handles = await asyncio.gather(*(client.start_workflow(ThreeSteps, i, id=f"f-{i}", task_queue="q")
                                         for i in range(n)))
        results = [asyncio.ensure_future(h.result(timeout=240)) for h in handles]
        await wait_until(lambda: sum(EFFECTS.values()) >= n, 120, "a third of the activities")
        getattr(processors, how)("p1")
        assert sum(r.done() for r in results) < n
        values = await asyncio.gather(*results)
    assert values == [three_steps_result(i) for i in range(n)]
    # a killed member is removed from the group only when its session times out (6 s; a stopped
    # one leaves at once): if every workflow left was on the survivor's shards, they completed before that
    await wait_until(lambda: list(_members(kafka_config).values()) == [[0, 1, 2, 3]], 30,
                     "the survivor owning every shard")
    _assert_all_histories_clean(kafka_config, n)
    assert collections.Counter(EFFECTS.values()) == {1: 3 * n}


async def test_stopping_one_of_two_processors_moves_its_shards(client, processors, kafka_config):
    await _failover(client, processors, kafka_config, "stop")


async def test_sigkill_of_one_of_two_processors_moves_its_shards(client, processors, kafka_config):
    await _failover(client, processors, kafka_config, "kill")
