"""A member SIGKILLed between the two rounds of a cooperative rebalance and started again at once
leaves no partition without an owner (issue 15; chaos seeds 359861566 and 466860831).

In a cooperative rebalance a partition that moves is first revoked by its owner (round one) and
only given to its new owner in round two, which the old owner starts when it rejoins after
revoking. Each test kills the old owner inside that window (its revoke callback stalled, see
``tests.faults.stalled_revoke``) and starts a new process of the same instance at once, while the
group still counts the killed member. Every partition must then find an owner, and for the
history processor every shard must serve a workflow.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from kadence import Worker, activity, workflow
from kadence.topics import Catalogue, KafkaConfig, partition_for
from tests.integration.conftest import PARTITIONS, wait_until

STALLED = "tests.faults.stalled_revoke"


@activity.defn
async def echo(tag: str) -> str:
    return tag


@workflow.defn(name="Echo")
class Echo:
    @workflow.run
    async def run(self, tag: str) -> str:
        return await workflow.execute_activity(echo, tag, start_to_close_timeout=timedelta(seconds=30))


def _members(config: KafkaConfig, group: str) -> dict[str, set]:
    """Instance name -> the (topic, partition)s the coordinator gives it ({} while it cannot say)."""
    admin = AdminClient(config.base())
    try:
        desc = admin.describe_consumer_groups([group])[group].result(10)
    except (KafkaException, TimeoutError):  # coordinator loading, or slow on a loaded machine
        return {}
    return {
        m.client_id.rsplit(".", 1)[-1]: {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}
        for m in desc.members
    }


def _owned(config: KafkaConfig, group: str) -> set:
    return set().union(*_members(config, group).values())


async def _kill_between_rounds(config, processors, tmp_path, start, group: str, everything: set) -> None:
    """The first instance owns ``everything``; a second joins; the first is killed with its
    revocation pending and started again at once; every partition must find an owner."""
    marker = tmp_path / "revoking"
    start("a", env={"KADENCE_TEST_REVOKE_MARKER": str(marker)}, module=STALLED)
    await wait_until(lambda: _members(config, group).get("a") == everything, 60, "the first instance owning everything")
    start("b")
    await wait_until(marker.exists, 60, "the first round of the rebalance asking the first instance to revoke")
    revoking = marker.read_text()
    processors.kill(next(name for name in processors.procs if name.endswith("a")))
    start("a")
    try:
        await wait_until(
            lambda: _owned(config, group) == everything,
            90,
            f"every partition owned again (the killed instance was revoking {revoking})",
        )
    except AssertionError:
        raise AssertionError(f"owners: {_members(config, group)}; expected {sorted(everything)}") from None


async def test_processor_killed_between_rebalance_rounds_leaves_no_shard_unowned(
    client, processors, kafka_config, tmp_path
):
    topics = Catalogue(kafka_config)
    everything = {(topics.commands, p) for p in range(PARTITIONS)}
    await _kill_between_rounds(kafka_config, processors, tmp_path, processors.start, topics.processor_group, everything)
    # every shard serves: one workflow per partition runs to its result
    ids = {}
    for n in range(1000):
        ids.setdefault(partition_for(f"wf-{n}", PARTITIONS), f"wf-{n}")
        if len(ids) == PARTITIONS:
            break
    async with Worker(client, task_queue="q", workflows=[Echo], activities=[echo]):
        handles = [await client.start_workflow(Echo, wf, id=wf, task_queue="q") for wf in ids.values()]
        assert await asyncio.gather(*(h.result(timeout=60) for h in handles)) == list(ids.values())


async def test_timer_service_killed_between_rebalance_rounds_leaves_no_tier_unowned(processors, kafka_config, tmp_path):
    topics = Catalogue(kafka_config)
    tiers = [spec for spec in topics.core_specs() if spec.name.startswith(f"{kafka_config.namespace}.timers.")]
    assert tiers, "no timer tiers in the catalogue"
    everything = {(spec.name, p) for spec in tiers for p in range(spec.partitions)}
    await _kill_between_rounds(
        kafka_config, processors, tmp_path, processors.start_timers, f"{kafka_config.namespace}.timers", everything
    )
