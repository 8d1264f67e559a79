"""The chaos suite (issue #7): a steady load of sample workflows while processors, workers, the
timer service, the visibility projection and the broker are killed, paused and restarted at seeded
random moments, and bad inputs are injected; then the invariants of ``tests/faults/chaos/checker.py``
are checked over the history topic, the dead-letter topic and the activities' effect log in Redis,
and the visibility projection must equal what the history topic says.

    KADENCE_CHAOS_SECONDS=600 make test PYTEST_ARGS='-k chaos -s'   # a longer run
    KADENCE_CHAOS_SEED=1234 ...                                      # replay a run's fault plan

See docs/fault-testing.md for how to read a failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kadence import Client, KadenceError, Replayer, Worker
from kadence.connectors.verify import verify_namespace
from kadence.operations import Schedule
from kadence.readmodels import VisibilityReader
from kadence.testing import PartitionProbes
from kadence.topics import Catalogue, KafkaConfig
from kadence.topics.queue_limits import set_queue_limit
from kadence.topics.schedules import SCHEDULES_TASK_QUEUE
from kadence.topics.schema_registry import register_topics
from tests.faults.chaos import checker
from tests.faults.chaos.brokers import CLUSTER_FAULTS, ClusterBrokers
from tests.faults.chaos.cluster import MINIMUM_FAULTS, Cluster, plan_faults
from tests.faults.chaos.load import BrokerClock, LoadDriver, send_signal
from tests.faults.chaos.observe import observe, until_read
from tests.faults.chaos.workflows import (
    ACTIVITIES,
    TASK_QUEUE,
    WORKFLOWS,
    ChaosOrder,
    approval_for,
    expected_result,
    has_child,
    timer_seconds,
    wants_update,
)
from tests.integration.invariants import read_topic
from tests.integration.projection_support import ground_truth, list_all, mismatches

#: the chaos phase (load + faults); the whole test takes about this plus 60-90 s
CHAOS_SECONDS = float(os.environ.get("KADENCE_CHAOS_SECONDS", "80"))
#: the cluster's chaos phase: its faults (a rolling restart of three nodes among them) take longer
CLUSTER_CHAOS_SECONDS = float(os.environ.get("KADENCE_CHAOS_SECONDS", "150"))
MIN_WORKFLOWS = 500


def _redis_url() -> str:
    url = os.environ.get("KADENCE_REDIS_URL")
    assert url, (
        "the chaos suite needs Redis: run it under scripts/devstack.py (make test), which sets KADENCE_REDIS_URL"
    )
    return url


async def _projection_mismatches(config: KafkaConfig, timeout: float) -> list[str]:
    """Wait until the visibility projection equals what the history topic says (every run once,
    with its type, status, times, search attributes and last seq); the differences left on timeout."""
    import redis.asyncio as aioredis

    runs, _events = await asyncio.get_running_loop().run_in_executor(
        None, until_read, "the history topic", lambda: ground_truth(config)
    )
    redis = aioredis.from_url(_redis_url())
    try:
        deadline = time.monotonic() + timeout
        while True:
            reader = VisibilityReader(redis, config.namespace)
            records = {(r["workflow_id"], r["run_id"]): r for r in await list_all(reader, page_size=500)}
            diff = mismatches(runs, records)
            if not diff or time.monotonic() > deadline:
                return diff
            await asyncio.sleep(1.0)
    finally:
        await redis.aclose()


def _write_result(**result) -> None:
    """Where ``make chaos`` (scripts/chaos.py) asked for it: this seed's plan, faults and findings."""
    path = os.environ.get("KADENCE_CHAOS_RESULT")
    if path:
        Path(path).write_text(json.dumps(result, indent=1, default=str))


@pytest.mark.timeout(int(480 + 2 * CHAOS_SECONDS))
# The dev stack's 4 s broker session (so that a SIGKILLed broker re-registers quickly) made the
# starved single broker fence itself: its controller timed out its own heartbeats ("controller
# event queue overloaded") and took every partition's leader away, again and again, for minutes
# (chaos seed 3284925459). The suite restarts the broker gracefully, so it does not need the
# short session; 30 s keeps the only broker from fencing itself under the burners.
@pytest.mark.broker_config({"broker.session.timeout.ms": 30000, "broker.heartbeat.interval.ms": 2000})
async def test_chaos_load_with_faults_keeps_every_invariant(own_broker, tmp_path, monkeypatch):
    seed = int(os.environ.get("KADENCE_CHAOS_SEED") or random.randrange(2**32))
    await _chaos(own_broker, seed, CHAOS_SECONDS, tmp_path, monkeypatch)


@pytest.mark.chaos_cluster
@pytest.mark.timeout(int(900 + 2 * CLUSTER_CHAOS_SECONDS))
async def test_chaos_on_a_replicated_cluster_keeps_every_invariant(tmp_path, monkeypatch):
    """The same load, checks and engine faults on a three-node cluster (RF 3, min ISR 2), with the
    cluster's own faults (issue 43): a partition leader SIGKILLed, a node paused past its broker
    session, a rolling restart of every node, a node lost for good (data deleted, a blank node
    in its place), the active controller SIGKILLed. The time from each fault to the first
    command answered on every commands partition is printed and stored. ``make chaos`` with
    ``CHAOS_CLUSTER=1`` runs it over many seeds; ``make test`` does not (marker ``chaos_cluster``)."""
    from kadence.devstack import cluster as devcluster

    seed = int(os.environ.get("KADENCE_CHAOS_SEED") or random.randrange(2**32))
    # the broker session at Kafka's default (9 s): two starved cores hold three nodes and the engine
    props = {"broker.session.timeout.ms": 9000, "broker.heartbeat.interval.ms": 2000}
    cluster = devcluster.KafkaCluster(3, die_with_parent=True, heap_mb=384, config=props)
    await asyncio.get_running_loop().run_in_executor(None, cluster.start)
    try:
        await _chaos(cluster, seed, CLUSTER_CHAOS_SECONDS, tmp_path, monkeypatch, replicated=True)
    finally:
        await asyncio.get_running_loop().run_in_executor(None, cluster.cleanup)


async def _chaos(broker, seed: int, seconds: float, tmp_path, monkeypatch, replicated: bool = False) -> None:
    """One chaos run on ``broker`` (a ``KafkaBroker``, or with ``replicated`` a ``KafkaCluster``
    whose broker faults are ``ClusterBrokers``'): load, faults, drain, every check."""
    rng = random.Random(seed)
    workflows = max(MIN_WORKFLOWS, int(seconds * 6.5))
    logdir = Path(os.environ.get("KADENCE_CHAOS_LOGDIR") or tmp_path)
    logdir.mkdir(parents=True, exist_ok=True)
    print(
        f"\nchaos: seed {seed} (KADENCE_CHAOS_SEED={seed} reproduces the fault plan), {seconds:.0f} s, "
        f"{workflows} workflows, {'a three-node cluster' if replicated else 'one broker'}, logs in {logdir}"
    )
    # KADENCE_CHAOS_SCHEMA_REGISTRY=1 (with the dev stack's registry): every process writes the
    # public topics in the Confluent wire format (decision 0056), under the same faults
    registry_url = os.environ.get("KADENCE_DEV_SCHEMA_REGISTRY_URL", "")
    if os.environ.get("KADENCE_CHAOS_SCHEMA_REGISTRY") == "1":
        assert registry_url, "KADENCE_CHAOS_SCHEMA_REGISTRY=1 needs the dev stack's schema registry"
        monkeypatch.setenv("KADENCE_SCHEMA_REGISTRY_URL", registry_url)  # the processes it starts
        print(f"chaos: public topics in the schema registry's format ({registry_url})")
    config = KafkaConfig(
        bootstrap=broker.bootstrap,
        namespace=f"c{uuid.uuid4().hex[:8]}",
        partitions=4,
        replication=3 if replicated else 1,
        schema_registry_url=os.environ.get("KADENCE_SCHEMA_REGISTRY_URL", ""),
    )
    if replicated:
        broker = ClusterBrokers(broker, config, rng)
    own_broker = broker
    Catalogue(config).apply()
    if config.schema_registry_url:
        register_topics(Catalogue(config), config.schema_registry_url)
    Catalogue(config).ensure_queue(TASK_QUEUE)
    Catalogue(config).ensure_queue(SCHEDULES_TASK_QUEUE)
    if seed % 2:
        # rate limits under faults (issue 46): odd seeds pace one activity type, at a rate the
        # load never reaches, so its tasks take the limiter's path (and never run eagerly)
        set_queue_limit(config, TASK_QUEUE, None, {"charge": 1000.0}, identity="chaos", reason="limits under faults")
        print("chaos: activity type charge paced (queue rate limit 1000/s)")
    prefix = f"chaos:{config.namespace}"
    # a processor blocked in a transaction call (librdkafka #5511) exits and is restarted
    monkeypatch.setenv("KADENCE_TXN_STALL_EXIT_S", "45")
    cluster = Cluster(own_broker, config, logdir, redis_url=_redis_url(), prefix=prefix, rng=rng)
    plan = plan_faults(rng, seconds, CLUSTER_FAULTS if replicated else None)
    t_begin = time.monotonic()
    cluster.start()
    client = await Client.connect(config=config)
    # a worker in this process: it runs the first task of the eager starts (workflows.eager);
    # its activities record to the run's ledger as the worker processes' do
    monkeypatch.setenv("KADENCE_CHAOS_PREFIX", prefix)
    eager_worker = Worker(
        client, task_queue=TASK_QUEUE, workflows=WORKFLOWS, activities=ACTIVITIES, identity="chaos-driver"
    )
    eager_serving = asyncio.get_running_loop().create_task(eager_worker.run())
    await eager_worker.wait_started(120)
    driver = LoadDriver(client, config, rng, workflows=workflows, eager_worker=eager_worker)
    probes = PartitionProbes(client, config.partitions)
    probes.start()
    try:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        stop_injecting, stop_supervising = asyncio.Event(), asyncio.Event()
        supervisor = loop.create_task(cluster.supervise(stop_supervising))
        injections = loop.create_task(driver.run_injections(stop_injecting))
        await asyncio.gather(
            driver.run_crons(),
            driver.run_schedules(),
            driver.run_starts(seconds * 0.8),
            cluster.run_faults(plan, seconds, t0),
        )
        stop_injecting.set()
        await injections
        await driver.stop_crons()
        await driver.stop_schedules()
        t_chaos = time.monotonic()
        print(f"chaos: chaos phase over after {t_chaos - t_begin:.0f} s; draining", flush=True)
        late = await driver.drain(timeout=max(120.0, seconds))
        stuck_partitions = await driver.barrier()
        stop_supervising.set()
        await supervisor
        await probes.stop()
        recovery = [
            {
                **fault,
                "recovered_s": probes.recovery(fault["started"]),
                "unserved_s": probes.unserved(fault["started"], fault["started"] + fault["seconds"]),
            }
            for fault in cluster.faults
        ]
        t_drain = time.monotonic()
        obs = observe(config, _redis_url(), prefix)
        projection_diff = await _projection_mismatches(config, timeout=120)
        violations = driver.violations + checker.check(driver.exp, obs, Replayer(workflows=[*WORKFLOWS, Schedule]))
        # the operator's reconciliation (`kadence verify`) over the same namespace: its history checks
        # are the checker's own; its state and reply checks are added here
        report = until_read("the namespace (kadence verify)", lambda: verify_namespace(config))
        violations += [
            checker.Violation("verify", str(g), (g.workflow_id,)) for g in report.gaps if g.check in ("state", "reply")
        ]
        violations.sort(key=lambda v: checker.INVARIANTS.index(v.invariant))
        counts = {**driver.counts, **cluster.counts}
        print(f"chaos: exercised {counts}")
        print(
            f"chaos: {len(obs.histories)} runs, {sum(map(len, obs.histories.values()))} history events, "
            f"{len(obs.ledger)} effects, {len(obs.attempts)} activity executions, {len(obs.dead_letters)} dead letters"
        )
        print("chaos: faults\n  " + "\n  ".join(cluster.fault_log))
        print(
            "chaos: per commands partition, the longest time unanswered around each fault (from its start "
            "to the first answer after its end)\n  "
            + "\n  ".join(f"{r['at_s']:6.1f}s {r['fault']} {r['target'] or ''}: {r['unserved_s']}" for r in recovery)
        )
        print(
            f"chaos: chaos phase {t_chaos - t_begin:.0f} s, drain {t_drain - t_chaos:.0f} s, "
            f"check {time.monotonic() - t_drain:.0f} s; not completed in time: {late[:20]}; partitions not "
            f"answering: {stuck_partitions}"
        )
        print(f"chaos: violations by invariant: {checker.summarize(violations)}")
        _write_result(
            seed=seed,
            seconds=seconds,
            plan=plan,
            faults=[{k: v for k, v in r.items() if k != "started"} for r in recovery],
            replicated=replicated,
            counts=dict(counts),
            runs=len(obs.histories),
            events=sum(map(len, obs.histories.values())),
            violations=checker.summarize(violations),
            first_violations=[f"{v.invariant}: {v.message}" for v in violations[:10]],
            late=late[:20],
            stuck_partitions=stuck_partitions,
            projection_diff=projection_diff[:10],
            unexpected_exits=cluster.unexpected_exits,
            elapsed_s=round(time.monotonic() - t_begin, 1),
        )
        if violations or late:
            cluster.dump_stacks()
            await asyncio.sleep(1.0)  # for the dumps to reach the logs printed below
        if violations:
            print(checker.explain(violations, obs))
            for wf in late[:5]:
                try:  # a stuck partition must not hide the report below, nor use up the test's time
                    described = await asyncio.wait_for(client.get_workflow_handle(wf).describe(), 10)
                except (TimeoutError, KadenceError) as exc:
                    described = f"no answer: {exc!r}"
                print(f"chaos: describe {wf}: {described}")
            print(cluster.logs())
        checker.assert_clean(violations)
        assert not stuck_partitions, f"commands partitions {stuck_partitions} were not processed (a stuck processor)"
        assert not projection_diff, (
            f"the visibility projection (killed {counts.get('projection_kills', 0)} times) "
            f"differs from the history topic in {len(projection_diff)} runs: "
            f"{projection_diff[:10]}"
        )
        assert not cluster.unexpected_exits, f"components died without being killed: {cluster.unexpected_exits}"
        assert counts["workflows_started"] >= MIN_WORKFLOWS
        floors = {
            "processor_kills": MINIMUM_FAULTS["kill_processor"],
            "worker_kills": MINIMUM_FAULTS["kill_worker"],
            "broker_restarts": 1,
            "timer_service_kills": 1,
            "processor_pauses": 1,
            "projection_kills": MINIMUM_FAULTS["kill_projection"],
            **({f"{name}s": n for name, n in CLUSTER_FAULTS.items()} if replicated else {}),
        }
        assert all(counts.get(k, 0) >= n for k, n in floors.items()), f"fault floor not reached: {counts}"
        for what in (
            "duplicate_starts",
            "duplicate_signals",
            "duplicate_updates",
            "rejected_updates",
            "stale_task_completions",
            "late_activity_completions",
            "undecodable_records",
            "pauses",
            "eager_starts",
            "eager_raced_starts",
            "eager_abandoned_first_tasks",
            "schedules_created",
        ):
            assert counts.get(what, 0) >= 1, f"no {what} injected: {counts}"
    except BaseException:  # pytest-timeout's too (SIGALRM): where every component sat, in its log
        cluster.dump_stacks()
        time.sleep(1.0)  # faulthandler writes from the signal handler; give it the moment
        try:  # and the broker's own log (its directory is removed after the test): coordinator, fencing
            shutil.copy(own_broker.log_path, logdir / "broker-server.log")
            shutil.copy(own_broker.log_path.with_name("broker.out"), logdir / "broker.out")
        except OSError:
            pass
        raise
    finally:
        await probes.stop()
        driver.close()
        eager_worker.shutdown()
        await asyncio.wait({eager_serving}, timeout=30)
        await client.close()
        cluster.close()


async def test_checker_reports_a_duplicated_history_event_with_its_workflow(
    client, processors, kafka_config, monkeypatch
):
    """A real (small) run is clean; a copy of one of its history records, produced again into
    the history topic, is reported as a duplicate with the workflow's ID."""
    prefix = f"chaos:{kafka_config.namespace}"
    monkeypatch.setenv("KADENCE_CHAOS_PREFIX", prefix)  # the activities run in this process
    redis_url = _redis_url()
    processors.start()
    ns = [3, 7, 11, 19]  # no timer, no child (no timer service needed), no update; 3 waits for a signal
    assert not any(timer_seconds(n) or has_child(n) or wants_update(n) for n in ns), "pick orders that need none"
    exp = checker.Expectations()
    async with Worker(client, task_queue=TASK_QUEUE, workflows=WORKFLOWS, activities=ACTIVITIES):
        for n in ns:
            handle = await client.start_workflow(
                ChaosOrder, n, id=f"dup-{n}", task_queue=TASK_QUEUE, request_id=f"start-dup-{n}"
            )
            exp.results[handle.id], exp.run_ids[handle.id] = expected_result(n), handle.run_id
        await send_signal(client, "dup-3", "signal-dup-3", approval_for(3))
        exp.signals["signal-dup-3"] = "dup-3"
        for n in ns:
            assert await client.get_workflow_handle(f"dup-{n}").result(timeout=60) == expected_result(n)
    replayer = Replayer(workflows=WORKFLOWS)
    before = checker.check(exp, observe(kafka_config, redis_url, prefix), replayer)
    assert before == [], before

    topics = Catalogue(kafka_config)
    raw = [(k, v, p) for k, v, p, _o in read_topic(kafka_config, topics.history) if k.startswith(b"dup-7/")]
    key, value, partition = raw[len(raw) // 2]  # an event in the middle of dup-7's run
    producer = Producer(kafka_config.producer())
    producer.produce(topics.history, value, key, partition=partition)
    producer.flush(10)

    after = checker.check(exp, observe(kafka_config, redis_url, prefix), replayer)
    assert after, "the checker missed a duplicated history event"
    first = after[0]
    seq = int(key.decode().rsplit("/", 1)[1])
    assert first.invariant == "history" and first.workflow_ids == ("dup-7",)
    assert f"seq {seq} (" in first.message and "recorded again" in first.message
    report = verify_namespace(kafka_config)  # the operator's tool finds it too
    assert report.counts["history"] >= 1 and {g.workflow_id for g in report.gaps} == {"dup-7"}, report.gaps
    try:
        checker.assert_clean(after)
    except AssertionError as exc:
        assert "invariant 'history' violated" in str(exc) and "dup-7" in str(exc)
    else:
        raise AssertionError("assert_clean passed a history with a duplicate event")


async def test_barrier_clock_counts_the_time_the_broker_does_not_answer(own_broker):
    """The barrier leaves out of its deadline only the time the broker does not serve: a paused
    broker's seconds count, a serving broker's do not."""
    config = KafkaConfig(bootstrap=own_broker.bootstrap, namespace=f"b{uuid.uuid4().hex[:8]}", partitions=1)
    Catalogue(config).apply()
    with BrokerClock(config, Catalogue(config).commands) as clock:
        await asyncio.sleep(4)
        serving = clock.unresponsive_s
        own_broker.proc.send_signal(signal.SIGSTOP)
        try:
            await asyncio.sleep(8)
        finally:
            own_broker.proc.send_signal(signal.SIGCONT)
        await asyncio.sleep(6)  # the probe in flight comes back
        paused = clock.unresponsive_s - serving
    assert serving < 1.0, serving
    assert 5.0 <= paused <= 14.0, paused
