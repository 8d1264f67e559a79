"""A processor whose first assignment meets a broker that cannot say where a commands partition
begins (NOT_LEADER_FOR_PARTITION while it restarts) waits for it instead of exiting.

Chaos seed 3284639093 (session 17): a processor started on a fresh namespace, was assigned its
partitions as the broker restarted, and ``get_watermark_offsets`` for a partition with no committed
offset raised out of the rebalance callback and ended the process with status 1. The consumer
below stands in for that broker: its first two such reads raise the error the broker gave.
"""

from __future__ import annotations

import threading

from confluent_kafka import Consumer, KafkaError, KafkaException
from prometheus_client import CollectorRegistry

from kadence import Worker
from kadence.processors import HistoryProcessor, ProcessorConfig, history_processor
from tests.integration.workflows import ThreeSteps, add, double, three_steps_result


class LeaderMoving(Consumer):
    """``get_watermark_offsets`` fails twice as a restarting broker answered, then works."""

    failed = 0

    def get_watermark_offsets(self, partition, *args, **kwargs):
        if type(self).failed < 2 and partition.topic.endswith(".commands"):
            type(self).failed += 1
            raise KafkaException(
                KafkaError(
                    KafkaError.NOT_LEADER_FOR_PARTITION,
                    "Failed to get watermark offsets: Broker: Not leader for partition",
                )
            )
        return super().get_watermark_offsets(partition, *args, **kwargs)


async def test_a_first_assignment_that_meets_a_restarting_broker_waits_for_it(kafka_config, client, monkeypatch):
    LeaderMoving.failed = 0
    monkeypatch.setattr(history_processor, "Consumer", LeaderMoving)
    proc = HistoryProcessor(
        ProcessorConfig(kafka=kafka_config, instance_id="moving-p0", session_timeout_ms=6000),
        registry=CollectorRegistry(),
    )
    crashed: list[BaseException] = []

    def run() -> None:
        try:
            proc.run()
        except BaseException as exc:
            crashed.append(exc)
            raise

    runner = threading.Thread(target=run, name="processor-under-test", daemon=True)
    runner.start()
    try:
        async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double]):
            handle = await client.start_workflow(ThreeSteps, 3, id="moving-1", task_queue="q", timeout=60)
            assert await handle.result(timeout=90) == three_steps_result(3)
        assert LeaderMoving.failed == 2 and crashed == [] and runner.is_alive()
    finally:
        proc.stop()
        runner.join(30)
    assert crashed == []
