"""Activity timeouts, heartbeats and many timers through the whole engine on the real broker."""

import asyncio
import os
import random
import signal
import subprocess
import sys

from kadence import Worker

from .conftest import wait_until
from .invariants import check_history, histories
from .workflows import HEARTBEATS, ChargeRemote, ManyTimers, Resumable, resumable


def _activity_worker(config, effects_dir, hang: bool, log):
    env = {
        **os.environ,
        "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap,
        "KADENCE_NAMESPACE": config.namespace,
        "KADENCE_TEST_EFFECTS": str(effects_dir),
        "KADENCE_TEST_HANG": "1" if hang else "0",
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kadence.cli",
            "worker",
            "--task-queue",
            "kq",
            "--module",
            "tests.integration.kill_activities",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


async def test_activity_worker_killed_mid_activity_is_retried_and_the_effect_happens_once(
    client, processors, kafka_config, tmp_path
):
    processors.start()
    processors.start_timers()
    log = open(tmp_path / "workers.log", "w")
    first = _activity_worker(kafka_config, tmp_path, True, log)
    second = None
    try:
        async with Worker(client, task_queue="q", workflows=[ChargeRemote]):
            handle = await client.start_workflow(ChargeRemote, 500, id="kill-1", task_queue="q")
            attempts = tmp_path / "attempts.log"
            await wait_until(lambda: attempts.exists() and attempts.read_text().strip(), 60, "attempt 1 to start")
            first.send_signal(signal.SIGKILL)
            first.wait(10)
            second = _activity_worker(kafka_config, tmp_path, False, log)
            assert await handle.result(timeout=90) == "charged 500"
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    lines = [line.split() for line in (tmp_path / "attempts.log").read_text().splitlines()]
    keys = {key for _, key, _ in lines}
    assert len(keys) == 1, "every attempt carries the same idempotency key"
    assert [int(a) for a, _, _ in lines][:1] == [1] and max(int(a) for a, _, _ in lines) >= 2
    assert len(list((tmp_path / "effects").iterdir())) == 1, "the business effect happened once"
    events = await handle.history()
    kinds = [e["type"] for e in events]
    assert kinds.count("ActivityTaskCompleted") == 1
    timeouts = [e for e in events if e["type"] == "ActivityTaskAttemptFailed"]
    assert timeouts and timeouts[0]["attributes"]["timeout_type"] == "start_to_close"


async def test_heartbeat_timeout_retries_and_the_next_attempt_reads_the_details(client, processors):
    processors.start()
    processors.start_timers()
    HEARTBEATS.clear()
    async with Worker(client, task_queue="q", workflows=[Resumable], activities=[resumable]):
        handle = await client.start_workflow(Resumable, 10, id="hb-1", task_queue="q")
        result = await handle.result(timeout=60)
    assert result == {"attempt": 2, "resumed_from": 5}
    assert HEARTBEATS[:2] == [(1, 0), (2, 5)]
    [failed] = [e for e in await handle.history() if e["type"] == "ActivityTaskAttemptFailed"]
    assert failed["attributes"]["timeout_type"] == "heartbeat"


async def test_ten_thousand_timers_fire_once_and_never_early(client, processors, kafka_config):
    processors.start()
    processors.start_timers()
    rng = random.Random(7)
    n_workflows, per_workflow = 100, 100
    plans = [[rng.randrange(1, 8000) for _ in range(per_workflow)] for _ in range(n_workflows)]
    async with Worker(client, task_queue="q", workflows=[ManyTimers]):
        handles = await asyncio.gather(
            *(client.start_workflow(ManyTimers, plan, id=f"timers-{i}", task_queue="q") for i, plan in enumerate(plans))
        )
        results = await asyncio.gather(*(h.result(timeout=300) for h in handles))
    assert results == [per_workflow] * n_workflows
    runs = histories(kafka_config)
    fired_total = 0
    for (wf, _run), events in runs.items():
        assert check_history(events) == [], wf
        started = {
            e["attributes"][1]["timer_id"]: e["attributes"][1]["fire_at_ms"]
            for e in events
            if e["attributes"][0] == "TimerStarted"
        }
        fired = [e for e in events if e["attributes"][0] == "TimerFired"]
        assert len(started) == per_workflow and len(fired) == per_workflow, wf
        assert len({e["attributes"][1]["timer_id"] for e in fired}) == per_workflow, f"{wf}: a timer fired twice"
        for e in fired:
            assert e["timestamp_ms"] >= started[e["attributes"][1]["timer_id"]], f"{wf}: timer fired early"
        fired_total += len(fired)
    assert fired_total == n_workflows * per_workflow


async def test_a_slow_activity_never_blocks_the_ones_behind_it_on_its_partition(client, processors, kafka_config):
    from kadence.topics import partition_for

    from .workflows import GATES, GateOnQ, ThreeSteps, add, double, gate, three_steps_result

    processors.start()
    parts = kafka_config.partitions
    # activity tasks are keyed by workflow ID: pick fast workflows on the slow one's partition
    fast_ids = [f"fast-{i}" for i in range(200) if partition_for(f"fast-{i}", parts) == partition_for("slow-1", parts)][
        :5
    ]
    GATES.pop("slow-1", None)
    async with Worker(client, task_queue="q", workflows=[GateOnQ, ThreeSteps], activities=[gate, add, double]):
        slow = await client.start_workflow(GateOnQ, id="slow-1", task_queue="q")
        await wait_until(lambda: "slow-1" in GATES, 30, "the slow activity to start")
        fast = await asyncio.gather(
            *(client.start_workflow(ThreeSteps, i, id=wid, task_queue="q") for i, wid in enumerate(fast_ids))
        )
        assert await asyncio.gather(*(h.result(timeout=60) for h in fast)) == [three_steps_result(i) for i in range(5)]
        assert (await slow.describe())["status"] == "running", "the slow activity is still running"
        GATES["slow-1"].set()
        assert await slow.result(timeout=30) == "opened:slow"


async def test_an_activity_timeout_is_fired_by_the_processor_across_a_kill_without_timer_service(
    client, processors, kafka_config
):
    """Activity timeouts are deadlines the processor derives from the committed state (decision
    0026): no timer service runs here, the processor that armed the timeout is SIGKILLed while the
    attempt runs, and its replacement rebuilds the deadline while restoring and fires it, once,
    not early, without a timer record."""
    from kadence.topics import Catalogue
    from kadence.topics.catalogue import TIMER_TIERS_MS

    from .invariants import read_topic
    from .workflows import ATTEMPTS, GivesUpAfterTimeout, never_returns

    processors.start()
    ATTEMPTS.clear()
    async with Worker(client, task_queue="q", workflows=[GivesUpAfterTimeout], activities=[never_returns]):
        handle = await client.start_workflow(GivesUpAfterTimeout, 4.0, id="deadline-1", task_queue="q")
        await wait_until(lambda: ATTEMPTS, 30, "the attempt to start")
        processors.kill()
        processors.start()
        result = await handle.result(timeout=60)
    assert result.startswith("gave up:") and "start_to_close" in result, result
    events = await handle.history(raw=True)
    [scheduled] = [e for e in events if e["attributes"][0] == "ActivityTaskScheduled"]
    timed_out = [e for e in events if e["attributes"][0] == "ActivityTaskTimedOut"]
    assert len(timed_out) == 1 and timed_out[0]["attributes"][1]["timeout_type"] == "start_to_close"
    assert timed_out[0]["timestamp_ms"] >= scheduled["timestamp_ms"] + 4000, "the timeout fired early"
    assert len(ATTEMPTS) == 1
    records = [
        v
        for tier in TIMER_TIERS_MS
        for _k, v, _p, _o in read_topic(kafka_config, Catalogue(kafka_config).timers(tier), "TimerRecord")
        if v["workflow_id"] == "deadline-1"
    ]
    assert [r["kind"] for r in records if r["kind"] != "run_timeout"] == [], "an activity timeout became a timer record"


async def test_a_full_backlog_pauses_fetching_and_after_it_nothing_is_lost_or_run_twice(client, processors):
    """One slot, held: the activity tasks behind it fill the worker's backlog (100 records) and
    fetching pauses. Opened, every activity runs once and fetching resumes where it stopped (the
    resume seeks to the position, which wakes the fetcher without skipping or repeating a record)."""
    from .workflows import HOLD, HeldOnce, held

    processors.start()
    HOLD.update(gate=asyncio.Event(), done=[])
    n = 180
    async with Worker(
        client,
        task_queue="q",
        workflows=[HeldOnce],
        activities=[held],
        max_concurrent_activities=1,
        activity_read_ahead=100,
    ) as worker:
        handles = await asyncio.gather(
            *(client.start_workflow(HeldOnce, i, id=f"held-{i}", task_queue="q") for i in range(n))
        )
        await wait_until(lambda: worker.stats["backlog_pauses"] >= 1, 60, "the backlog to fill and pause fetching")
        HOLD["gate"].set()
        results = await asyncio.gather(*(h.result(timeout=120) for h in handles))
    assert results == list(range(n))
    assert sorted(HOLD["done"]) == list(range(n))  # each ran once


async def test_a_worker_runs_at_most_its_activity_slots_and_finishes_the_backlog(client, processors):
    """60 activities ready at once on a worker with 4 slots: never more than 4 run together, and
    every one completes (the records beyond the limit wait in the worker's backlog)."""
    from .workflows import RUNNING, CountedOnce, counted

    processors.start()
    RUNNING.update(now=0, max=0)
    async with Worker(
        client, task_queue="q", workflows=[CountedOnce], activities=[counted], max_concurrent_activities=4
    ):
        handles = await asyncio.gather(
            *(client.start_workflow(CountedOnce, i, id=f"slots-{i}", task_queue="q") for i in range(60))
        )
        results = await asyncio.gather(*(h.result(timeout=120) for h in handles))
    assert results == list(range(60))
    assert RUNNING["max"] == 4, RUNNING
