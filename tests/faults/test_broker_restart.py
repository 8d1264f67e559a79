"""Timers survive restarts of every component, the broker included (its own broker here, so the
session's broker is not disturbed)."""

import time
import uuid

from kadence import Client, Worker
from kadence.topics import Catalogue, KafkaConfig
from tests.integration.conftest import ProcessorProcs, wait_until
from tests.integration.invariants import read_topic
from tests.integration.workflows import SleepThenAct, add

FOURTEEN_DAYS = 14 * 24 * 3600


async def _timer_started(handle) -> bool:
    return any(e["type"] == "TimerStarted" for e in await handle.history())


async def test_timers_survive_processor_timer_service_and_broker_restarts(own_broker, tmp_path):
    config = KafkaConfig(bootstrap=own_broker.bootstrap, namespace=f"r{uuid.uuid4().hex[:8]}", partitions=2)
    Catalogue(config).apply()
    procs = ProcessorProcs(config, tmp_path)
    procs.start()
    procs.start_timers()
    client = await Client.connect(config=config)
    try:
        async with Worker(client, task_queue="q", workflows=[SleepThenAct], activities=[add]):
            short = await client.start_workflow(SleepThenAct, 12, id="short", task_queue="q")
            long = await client.start_workflow(SleepThenAct, FOURTEEN_DAYS, id="long", task_queue="q")
            await wait_until(lambda: _timer_started(short), 30, "the short timer to start")
            await wait_until(lambda: _timer_started(long), 30, "the long timer to start")
            t0 = time.monotonic()
            procs.kill("p0")
            procs.kill_timers()
            own_broker.restart()
            procs.start()
            procs.start_timers()
            assert await short.result(timeout=120) == 2
            assert time.monotonic() - t0 < 60
            described = await long.describe()
            assert described["status"] == "running"
        events = await long.history()
        kinds = [e["type"] for e in events]
        assert kinds.count("TimerStarted") == 1 and "TimerFired" not in kinds
        [started] = [e for e in events if e["type"] == "TimerStarted"]
        fire_at = started["attributes"]["fire_at_ms"]
        assert fire_at - started["attributes"]["workflow_task_completed_seq"] > 0
        # the 14-day timer is still a durable record in the day tier, not a promise in memory
        day_tier = [
            v
            for _k, v, _p, _o in read_topic(config, Catalogue(config).timers("1d"), "TimerRecord")
            if v["workflow_id"] == "long"
        ]
        assert [t["fire_at_ms"] for t in day_tier] == [fire_at]
        short_kinds = [e["type"] for e in await short.history()]
        assert short_kinds.count("TimerFired") == 1
    finally:
        await client.close()
        procs.close()
