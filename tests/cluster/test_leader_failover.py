"""The short leader-kill test of issue 43 (the longer faults are the chaos suite's, ``make chaos``
with ``CHAOS_CLUSTER=1``): on the three-node cluster (RF 3, min ISR 2), two processors and a
worker run workflows while the node leading partition 0 of ``commands`` is SIGKILLed and later
started again. Every start the client was told succeeded has exactly one run, every history is
clean (one result per activity, one close, seqs 1..n), every result is right; and the time from
the kill to the first command answered on that partition is printed."""

from __future__ import annotations

import asyncio
import time

from confluent_kafka.admin import AdminClient

from kadence import Client, KadenceError, Worker
from kadence.testing import PartitionProbes
from kadence.topics import Catalogue, KafkaConfig
from tests.integration.conftest import ProcessorProcs
from tests.integration.invariants import check_history, histories
from tests.integration.workflows import ThreeSteps, add, double, three_steps_result

from .conftest import PARTITIONS, cluster_env

QUEUE = "failover"


async def test_a_leader_killed_under_load_loses_and_doubles_nothing(cluster, tmp_path, monkeypatch):
    env = {**cluster.client_env("admin"), "KADENCE_NAMESPACE": "failover", "KADENCE_PARTITIONS": str(PARTITIONS)}
    for key, value in env.items():  # the processors are started with this process's environment
        monkeypatch.setenv(key, value)
    config = KafkaConfig.from_env(cluster_env(cluster, "admin", **env))
    topics = Catalogue(config)
    topics.apply()
    topics.ensure_queue(QUEUE)
    procs = ProcessorProcs(config, tmp_path)
    procs.start("p0")
    procs.start("p1")
    # an engine runs one: an activity attempt lost with its worker or its reply (eager activities,
    # decision 0054) is retried after its timeout, and the retry's backoff is a timer
    procs.start_timers()
    admin = AdminClient(config.base())
    client = await Client.connect(config=config, wait_for_broker=60)
    started: dict[str, int] = {}

    async def start(i: int) -> None:
        wid = f"wf-{i}"
        for _ in range(30):  # a start the broker did not take is retried with the same request ID
            try:
                await client.start_workflow(ThreeSteps.run, i, id=wid, task_queue=QUEUE, request_id=f"start-{i}")
                started[wid] = i
                return
            except KadenceError:
                await asyncio.sleep(1)
        raise AssertionError(f"{wid} could not be started in 30 tries")

    try:
        async with Worker(client, task_queue=QUEUE, workflows=[ThreeSteps], activities=[add, double]):
            probes = PartitionProbes(client, PARTITIONS)
            probes.start()
            try:
                await asyncio.gather(*(start(i) for i in range(20)))
                leader = admin.list_topics(topics.commands, timeout=10).topics[topics.commands].partitions[0].leader
                victim = cluster.nodes[leader - 1]
                killed_at = time.monotonic()
                victim.kill()
                await asyncio.gather(*(start(i) for i in range(20, 40)))
                results = {wid: await client.get_workflow_handle(wid).result(timeout=180) for wid in sorted(started)}
                recovered = probes.recovery(killed_at)[0]
                victim.start(timeout=120)
                await asyncio.gather(*(start(i) for i in range(40, 45)))
                results.update(
                    {f"wf-{i}": await client.get_workflow_handle(f"wf-{i}").result(timeout=120) for i in range(40, 45)}
                )
            finally:
                await probes.stop()
        print(
            f"\nleader failover: node {leader} (leader of {topics.commands}[0]) killed; partition 0 answered "
            f"again after {recovered:.1f} s"
            if recovered is not None
            else "\nleader failover: no answer after the kill"
        )
        assert recovered is not None, "partition 0 never answered after its leader was killed"
        assert results == {wid: three_steps_result(i) for wid, i in started.items()}
        runs = histories(config)
        by_workflow: dict[str, list] = {}
        for (wid, _run), events in runs.items():
            by_workflow.setdefault(wid, []).append(events)
        assert set(by_workflow) >= set(started)
        problems = {wid: check_history(evs[0]) for wid, evs in by_workflow.items() if check_history(evs[0])}
        assert problems == {}, problems
        doubled = {wid: len(evs) for wid, evs in by_workflow.items() if len(evs) != 1}
        assert doubled == {}, f"workflows with more than one run: {doubled}"
    except BaseException:
        procs.dump_stacks()
        print(procs.logs())
        raise
    finally:
        await client.close()
        procs.close()
