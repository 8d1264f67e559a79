"""A shard whose restore meets a record it cannot decode: the workflow it belongs to is
quarantined, every other workflow of the shard is served (decision 0044).

Before, the restore raised and the processor retried it for ever: one damaged state record, or
one written by a newer schema version during a botched rolling upgrade, stopped every workflow of
its partition. Now the processor restores the rest, answers the quarantined workflow's commands
with ``WorkflowQuarantinedError`` and dead-letters them, so a redrive applies them once the
record is readable again."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from kadence import Worker, WorkflowQuarantinedError
from kadence.topics import Catalogue, serde
from kadence.topics.dead_letters import list_dead_letters, redrive
from kadence.topics.partitioner import partition_for
from kadence.topics.records import history_key

from .conftest import wait_until
from .workflows import Collector, ThreeSteps, add, double, three_steps_result


def _neighbour(workflow_id: str, partitions: int) -> str:
    """Another workflow ID on the same partition."""
    target = partition_for(workflow_id, partitions)
    return next(f"neighbour-{n}" for n in range(10_000) if partition_for(f"neighbour-{n}", partitions) == target)


def _plant(config, topic: str, key: str, value: bytes | None) -> None:
    producer = Producer(config.producer())
    producer.produce(topic, value, key.encode(), partition=partition_for(key.split("/")[0], config.partitions))
    assert producer.flush(10) == 0


async def test_an_undecodable_state_record_quarantines_its_workflow_and_no_other(client, processors, kafka_config):
    topics = Catalogue(kafka_config)
    # a state record of a schema version this processor does not know, as a newer release writes it
    _plant(kafka_config, topics.state, "damaged-1", b"K\x63" + b"\x00" * 40)
    processors.start()
    neighbour = _neighbour("damaged-1", kafka_config.partitions)

    async with Worker(client, task_queue="q", workflows=[ThreeSteps, Collector], activities=[add, double]):
        handle = await client.start_workflow(ThreeSteps, 2, id=neighbour, task_queue="q")
        assert await handle.result(timeout=60) == three_steps_result(2)  # the shard is served

        with pytest.raises(
            WorkflowQuarantinedError, match=r"state record .*\.state\[\d+\]@\d+ cannot be decoded"
        ) as raised:
            await client.start_workflow(Collector, 1, id="damaged-1", task_queue="q")
        assert raised.value.workflow_id == "damaged-1"
        with pytest.raises(WorkflowQuarantinedError):
            await client.get_workflow_handle("damaged-1").signal("add", "x")

        letters = [e for e in list_dead_letters(kafka_config) if e.record["key"] == b"damaged-1"]
        assert len(letters) == 2 and all(e.record["error_type"] == "WorkflowQuarantinedError" for e in letters)
        assert all(e.record["reason"].startswith("quarantined workflow: its state record") for e in letters)

        # the repair: the operator deletes the record (or deploys the release that reads it) and
        # the shard is restored again; the dead-lettered start is redriven and runs, once
        _plant(kafka_config, topics.state, "damaged-1", None)
        processors.stop()
        processors.start()
        start = next(e for e in letters if serde.decode("Command", e.record["value"])["body"][0] == "StartWorkflow")
        redrive(kafka_config, start.ref)
        restored = client.get_workflow_handle("damaged-1")
        await wait_until(lambda: _running(restored), 60, "the redriven start to be applied")
        await restored.signal("add", "after the repair")
        assert await restored.result(timeout=60) == ["after the repair"]


async def _running(handle) -> bool:
    try:
        return (await handle.describe())["status"] in ("running", "completed")
    except Exception:  # noqa: BLE001 - not started yet (not found) or the processor still restoring
        return False


async def test_an_undecodable_event_of_an_open_run_quarantines_the_run(client, processors, kafka_config):
    processors.start()
    async with Worker(client, task_queue="q", workflows=[Collector]):
        handle = await client.start_workflow(Collector, 2, id="torn-1", task_queue="q")
        await handle.signal("add", "a")
        await wait_until(lambda: _has_signal(handle), 30, "the signal to be recorded")
        processors.stop()
        _plant(
            kafka_config,
            Catalogue(kafka_config).history,
            history_key("torn-1", handle.run_id, 99),
            b"K\x0b" + b"\xff" * 12,
        )
        processors.start()
        with pytest.raises(WorkflowQuarantinedError, match=r"an event of its open run .* cannot be decoded"):
            await handle.signal("add", "b")
        other = await client.start_workflow(
            Collector, 1, id=_neighbour("torn-1", kafka_config.partitions), task_queue="q"
        )
        await other.signal("add", "fine")
        assert await other.result(timeout=60) == ["fine"]


async def _has_signal(handle) -> bool:
    return (await handle.describe())["signals_received"] >= 1
