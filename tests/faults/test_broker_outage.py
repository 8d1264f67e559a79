"""Issue 16's acceptance for broker outages: under 100 running workflows the broker is SIGKILLed
and restarted, then paused (SIGSTOP) for 30 s. No component exits (two processors, the timer
service, a ``kadence worker`` process and ``kadence projections run``), every workflow completes
once, every history is clean, and the visibility projection catches up with the history topic. The time from the broker answering again to the first command's reply is printed (it is
measured, not asserted: timings belong to ``make bench``).

Run by ``make soak``, not ``make test``. It had been kept out because it passed 1 of 2 runs in
session 10 (a transaction call hung after the broker's resume, librdkafka #5456/#5511, now given
up in the process since decision 0035) and 2 of 3 in session 11. In the failing session-11 run
the first starts on two partitions were never answered, their processor alive and silent after
a cooperative rebalance. That was the static-membership hazard of decision 0036. With dynamic
membership it passed 7 of 11 runs (sessions 12 and 13). Of the four failures, one was in a
clean-clone CI run, whose output was lost. In another, the visibility projection did not catch
up within 120 s. In two, the worker ran no activity after the 30 s pause: its task consumers
polled, alive, and got no records after their session timed out. Session 14: 4 of 6 runs, both
failures the projection's (its group formed while the restarted broker's metadata lacked the
history topic, and aiokafka refreshed it only after 5 minutes; now every 10 s), then 10 of 10.
After decision 0038, 4 of 5: the fifth was the worker's failure, now explained by the
``cgrp`` debug log its worker keeps. After the pause, the activity consumer rejoined and was
given its 4 partitions. librdkafka's own committed-offset fetch for them failed with a
request-level NOT_COORDINATOR, and librdkafka never retried it: the partitions stayed "pending"
with "4 offset queries" for the rest of the run, and nothing was fetched (librdkafka #5586, open).
Session 15: every subscribing consumer now assigns at the offsets it has read itself (decision
0039), and that shape did not come back in 27 runs. Two others did, once each: the timer
service's producer wedged after the pause (librdkafka #5430; it is now replaced like the engine
client's), and one start went unanswered before any outage. Session 16: 10 of 10; then a
reproduction without outages caught the unanswered start once. The first commands for one
partition were never in the log, and no delivery had failed (docs/fault-testing.md, "What it
found"). The cause is not known. A client can now produce a command again, with the same
request ID, when no reply has come (``resend_after_s``; on by default since session 17's
campaign, which ran with it and with the reply consumer's watch); session 17's soak: 5 of 5
on that code. The diagnostic below still prints where each start's
command and reply are. The test takes about two minutes, so it stays in ``make soak``
(``SOAK_RUNS=10``) rather than ``make test``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from kadence import BrokerUnavailableError, Client
from kadence.readmodels import VisibilityReader
from kadence.topics import Catalogue, KafkaConfig
from tests.integration.conftest import ProcessorProcs, stop_process, wait_until
from tests.integration.invariants import check_history, histories
from tests.integration.projection_support import ProjectionProcs, ground_truth, list_all, mismatches, redis_url
from tests.integration.workflows import SleepThenAct, ThreeSteps, three_steps_result

pytestmark = pytest.mark.soak

ROOT = Path(__file__).resolve().parents[2]
N = 100


def _where_starts_are(config: KafkaConfig) -> str:
    """Each start's command and reply (partition@offset, read uncommitted, so an open or aborted
    transaction's records show too), and the processors' committed offsets: a diagnosis."""
    topics = Catalogue(config)
    found: dict[str, list[str]] = {}
    for topic in (topics.commands, topics.replies):
        consumer = Consumer(config.consumer(None, **{"isolation.level": "read_uncommitted"}))
        try:
            parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
            deadline, quiet = time.monotonic() + 20, 0
            while time.monotonic() < deadline and quiet < 4:  # until 2 s without a record
                msgs = consumer.consume(500, timeout=0.5)
                quiet = quiet + 1 if not msgs else 0
                for msg in msgs:
                    if msg.error() is None and msg.key() is not None:
                        key = msg.key().decode(errors="replace")
                        if key.startswith(("outage-", "start-")):
                            found.setdefault(key, []).append(f"{topic}[{msg.partition()}]@{msg.offset()}")
        finally:
            consumer.close()
    group = Consumer(config.consumer(topics.processor_group))
    try:
        parts = group.list_topics(topics.commands, timeout=10).topics[topics.commands].partitions
        committed = group.committed([TopicPartition(topics.commands, p) for p in parts], timeout=10)
    finally:
        group.close()
    lines = [f"commands committed by the processors: {[(tp.partition, tp.offset) for tp in committed]}"]
    for i in range(N):
        wf, rq = f"outage-{i}", f"start-{i}"
        if len(found.get(wf, [])) != 1 or len(found.get(rq, [])) != 1:
            lines.append(f"{wf}: command {found.get(wf)}, reply {found.get(rq)}")
    return "\n".join(lines)


def _start_worker(config: KafkaConfig, logdir: Path) -> subprocess.Popen:
    # with librdkafka's consumer-group debug log: the failure this test has shown is a worker
    # whose task consumers got no records after the pause
    env = {
        **os.environ,
        "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap,
        "KADENCE_NAMESPACE": config.namespace,
        "KADENCE_KAFKA_DEBUG": "cgrp",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "kadence.cli", "worker", "--task-queue", "q", "--module", "tests.faults.outage_app"],
        env=env,
        cwd=ROOT,
        stdout=open(logdir / "worker.log", "w"),
        stderr=subprocess.STDOUT,
    )


async def test_broker_kill_restart_and_a_30s_pause_under_100_workflows_no_component_exits(own_broker, tmp_path):
    config = KafkaConfig(bootstrap=own_broker.bootstrap, namespace=f"o{uuid.uuid4().hex[:8]}", partitions=4)
    Catalogue(config).apply()
    procs = ProcessorProcs(config, tmp_path)
    # with librdkafka's consumer-group log, as the worker: where each assignment starts fetching
    procs.start("p0", env={"KADENCE_KAFKA_DEBUG": "cgrp"})
    procs.start("p1", env={"KADENCE_KAFKA_DEBUG": "cgrp"})
    procs.start_timers()
    worker = _start_worker(config, tmp_path)
    projections = ProjectionProcs(config, tmp_path)
    components = {
        "p0": procs.procs["p0"],
        "p1": procs.procs["p1"],
        "timers": procs.procs["timers:t0"],
        "worker": worker,
        "projections": projections.start("v0"),
    }

    def exited() -> dict[str, int]:
        return {name: p.returncode for name, p in components.items() if p.poll() is not None}

    client = await Client.connect(config=config)
    try:
        # each sleeps through both outages, then runs an activity
        try:
            handles = await asyncio.gather(
                *(
                    client.start_workflow(
                        SleepThenAct, 8, id=f"outage-{i}", task_queue="q", request_id=f"start-{i}", timeout=120
                    )
                    for i in range(N)
                )
            )
        except BrokerUnavailableError:
            # session 15 saw a start unanswered here, before any outage (9 of 10 runs pass): say
            # where its command and reply are, for the next time
            print(await asyncio.get_running_loop().run_in_executor(None, _where_starts_are, config))
            raise
        own_broker.kill()
        await asyncio.sleep(3)
        await asyncio.get_running_loop().run_in_executor(None, own_broker.start)
        back = time.monotonic()
        probe = await client.start_workflow(ThreeSteps, 5, id="probe-after-restart", task_queue="q", timeout=180)
        print(f"broker answering again -> first start replied: {time.monotonic() - back:.1f} s")
        await asyncio.sleep(2)
        os.kill(own_broker.proc.pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(30)
        finally:
            os.kill(own_broker.proc.pid, signal.SIGCONT)
        resumed = time.monotonic()
        results = await asyncio.gather(*(h.result(timeout=240) for h in handles))
        assert results == [2] * N
        assert await probe.result(timeout=120) == three_steps_result(5)
        print(f"broker resumed -> all {N} workflows completed: {time.monotonic() - resumed:.1f} s")
        assert exited() == {}, f"components exited: {exited()}\n{procs.logs()[-6000:]}\n{projections.logs()[-3000:]}"
        runs, _events = ground_truth(config)
        redis = aioredis.from_url(redis_url())
        try:
            reader = VisibilityReader(redis, config.namespace)

            async def caught_up() -> bool:
                return not mismatches(
                    runs, {(r["workflow_id"], r["run_id"]): r for r in await list_all(reader, page_size=500)}
                )

            await wait_until(caught_up, 120, "the visibility projection to catch up")
        finally:
            await redis.aclose()
        assert exited() == {}, f"components exited: {exited()}\n{projections.logs()[-3000:]}"
    except BaseException:
        procs.dump_stacks()  # where the processors sat, in their logs under tmp_path
        raise
    finally:
        projections.close()
        await client.close()
        stop_process(worker)
        procs.close()
    runs = {key: events for key, events in histories(config).items()}
    ids = sorted(wid for wid, _run in runs)
    assert ids == sorted([f"outage-{i}" for i in range(N)] + ["probe-after-restart"])  # one run each
    problems = {key: p for key, events in runs.items() if (p := check_history(events))}
    assert problems == {}
    for key, events in runs.items():
        kinds = [e["attributes"][0] for e in events]
        assert kinds.count("WorkflowExecutionCompleted") == 1, (key, kinds)
