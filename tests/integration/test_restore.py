"""A shard's restore from the state and history topics (``processors/store.py``): each workflow's
latest state record is the one decoded (earlier ones are staged and replaced, so an undecodable
record that a later one replaces quarantines nothing, and a tombstone removes the workflow), and
the open runs' events reach the store in chunks, in seq order, the same in both stores."""

from __future__ import annotations

import tempfile
from pathlib import Path

from confluent_kafka import Producer

from kadence import Worker
from kadence.processors import store as store_module
from kadence.processors.disk_store import DiskShardStore
from kadence.processors.store import MemoryShardStore, read_partition, restore_shard
from kadence.topics import Catalogue
from kadence.topics.partitioner import partition_for

from .workflows import Collector


def _plant(config, topic: str, key: str, value: bytes | None) -> None:
    producer = Producer(config.producer())
    producer.produce(topic, value, key.encode(), partition=partition_for(key, config.partitions))
    assert producer.flush(10) == 0


def _latest_state_raw(config, topic: str, workflow_id: str) -> bytes:
    found: list[bytes] = []

    def keep(key: bytes | None, value: bytes | None, _offset: int) -> None:
        if key == workflow_id.encode() and value is not None:
            found.append(value)

    read_partition(config, topic, partition_for(workflow_id, config.partitions), keep)
    assert found, f"no state record of {workflow_id}"
    return found[-1]


async def test_the_latest_state_wins_and_open_histories_arrive_in_chunks(client, processors, kafka_config, monkeypatch):
    topics = Catalogue(kafka_config)
    processors.start()
    ids = [f"restore-{n}" for n in range(6)]
    async with Worker(client, task_queue="q", workflows=[Collector]):
        handles = [await client.start_workflow(Collector, 99, id=wid, task_queue="q") for wid in ids]
        for n, handle in enumerate(handles):
            for i in range(n + 1):  # open runs of 3 to 8 events
                await handle.signal("add", i)
        for n, handle in enumerate(handles):
            assert await handle.query("count") == n + 1
    processors.stop()

    # restore-0: an undecodable record, then a good one (its latest): restored, not quarantined
    good = _latest_state_raw(kafka_config, topics.state, "restore-0")
    _plant(kafka_config, topics.state, "restore-0", b"K\x63" + b"\x00" * 40)
    _plant(kafka_config, topics.state, "restore-0", good)
    # restore-1: deleted (a tombstone after its states)
    _plant(kafka_config, topics.state, "restore-1", None)
    # gone-2: a tombstone, then a state again (a workflow ID used anew)
    _plant(kafka_config, topics.state, "gone-2", None)
    _plant(kafka_config, topics.state, "gone-2", good)

    monkeypatch.setattr(store_module, "RESTORE_CHUNK_EVENTS", 3)  # several chunks per partition
    partitions = {partition_for(wid, kafka_config.partitions) for wid in [*ids, "gone-2"]}
    restored: dict[str, dict] = {"memory": {}, "disk": {}}
    for kind in restored:
        for p in sorted(partitions):
            shard = MemoryShardStore(p) if kind == "memory" else DiskShardStore(p, Path(tempfile.mkdtemp()) / f"p{p}")
            quarantine: dict[str, str] = {}
            observed: dict[str, object] = {}
            restore_shard(
                kafka_config,
                topics.state,
                topics.history,
                p,
                shard,
                quarantine=quarantine,
                observe=lambda wf, st, seen=observed: seen.__setitem__(wf, st),
            )
            assert quarantine == {}, quarantine
            for wid in [*ids, "gone-2"]:
                if partition_for(wid, kafka_config.partitions) != p:
                    continue
                st = shard.get_state(wid)
                if st is None:
                    restored[kind][wid] = None
                    continue
                assert observed[wid] == st  # the deadline index sees the state the store keeps
                events = shard.get_history(wid, st["run_id"])
                restored[kind][wid] = {"status": st["status"], "seqs": [e["seq"] for e in events]}
            shard.close()

    assert restored["memory"] == restored["disk"]
    shards = restored["disk"]
    assert shards["restore-1"] is None
    assert shards["restore-0"]["status"] == "running"
    assert shards["gone-2"] is not None  # restore-0's state record under another key: kept as written
    for n, wid in enumerate(ids):
        if wid == "restore-1":
            continue
        seqs = shards[wid]["seqs"]
        assert seqs == list(range(1, len(seqs) + 1)), seqs  # every event once, in order
        assert len(seqs) >= n + 3, (wid, seqs)  # the start, its task's events, one per signal
