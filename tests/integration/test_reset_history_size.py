"""A reset's new run counts its own history's bytes (issue 44): the new run's state was built from
the old one's and kept its byte count, so describe overstated the size and ``kadence verify``
reported a ``state`` gap on a namespace where nothing went wrong."""

from __future__ import annotations

from kadence import Worker
from kadence.connectors.verify import verify_namespace
from kadence.processors.store import read_partition
from kadence.topics import Catalogue
from kadence.topics.partitioner import partition_for

from .workflows import ThreeSteps, add, double, three_steps_result


async def test_a_reset_run_counts_only_its_own_history_bytes(client, processors, kafka_config):
    processors.start()
    async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double]):
        handle = await client.start_workflow(ThreeSteps, 3, id="reset-size", task_queue="q")
        assert await handle.result(timeout=60) == three_steps_result(3)
        old = await handle.describe()
        reset = await handle.reset(reason="the size of the new run")
        assert await reset.result(timeout=60) == three_steps_result(3)
        new = await reset.describe()

    assert new["run_id"] != old["run_id"]
    sizes: dict[str, int] = {}

    def count(key: bytes | None, value: bytes | None, _offset: int) -> None:
        wf, run_id, _seq = key.decode().rsplit("/", 2)
        if wf == "reset-size" and value is not None:
            sizes[run_id] = sizes.get(run_id, 0) + len(value)

    partition = partition_for("reset-size", kafka_config.partitions)
    read_partition(kafka_config, Catalogue(kafka_config).history, partition, count)
    assert old["history_size_bytes"] == sizes[old["run_id"]], (old["history_size_bytes"], sizes)
    assert new["history_size_bytes"] == sizes[new["run_id"]], (new["history_size_bytes"], sizes)
    report = verify_namespace(kafka_config)
    assert report.ok, report.gaps
