"""Priority and fairness on the real broker (issue 46 item 4, decision 0060): a level-1 activity
behind a backlog of 10,000 level-5 ones starts within a second (it is on its own lane; the
level-5 lane stops fetching when the worker's read-ahead is full), a level-1 run's workflow task
is not behind a backlog of level-5 ones either, and a small tenant's tasks
are not starved by a big tenant's burst on the same queue (fairness keys): its p99 wait beside
ten times its load stays within a small multiple of its unloaded figure. Waits are the activity's start minus
the time the processor dispatched it (``activity.info().scheduled_time_ms``)."""

from __future__ import annotations

import asyncio
import collections
import statistics
import time
from datetime import timedelta

from kadence import Priority, Worker, activity, workflow
from kadence.topics.backlog import activity_backlogs

from .conftest import wait_until

#: activity kind -> (ms waited since dispatch, its priority as dispatched), in start order
STARTED: dict[str, list[tuple[float, object]]] = collections.defaultdict(list)
#: activity kind -> wall-clock ms at each start, in start order (to place a slow sample in time)
STARTED_AT: dict[str, list[float]] = collections.defaultdict(list)
TIMEOUT = timedelta(minutes=5)


@activity.defn
async def work(kind: str, sleep_s: float) -> None:
    info = activity.info()
    now = time.time() * 1000
    STARTED[kind].append((now - info.scheduled_time_ms, info.priority))
    STARTED_AT[kind].append(now)
    await asyncio.sleep(sleep_s)


@workflow.defn
class Bulk:
    @workflow.run
    async def run(self, queue: str, kind: str, n: int, sleep_s: float) -> int:
        await asyncio.gather(
            *(
                workflow.execute_activity(work, kind, sleep_s, task_queue=queue, start_to_close_timeout=TIMEOUT)
                for _ in range(n)
            )
        )
        return n


@workflow.defn
class One:
    @workflow.run
    async def run(self, queue: str, kind: str, level: int) -> None:
        # the activity's own level; its fairness key (if any) is the run's
        await workflow.execute_activity(
            work, kind, 0.0, task_queue=queue, start_to_close_timeout=TIMEOUT, priority=level or None
        )


async def test_a_first_level_task_starts_within_a_second_behind_10000_of_the_last_level(client, processors):
    processors.start()
    STARTED.clear()
    STARTED_AT.clear()
    runs, per_run = 50, 200
    async with Worker(client, task_queue="wf", workflows=[Bulk, One]):
        # the backlog first, with no activity worker: 10,000 tasks on the level-5 lane (the runs'
        # priority, which their activities inherit)
        bulk = [
            await client.start_workflow(
                Bulk, "acts", "bulk", per_run, 0.002, id=f"bulk-{i}", task_queue="wf", priority=Priority(priority_key=5)
            )
            for i in range(runs)
        ]

        def backlog_by_level() -> dict[int, int]:
            rows = activity_backlogs(client.config, "acts")
            return rows[0].by_level if rows else {}

        await wait_until(
            lambda: backlog_by_level().get(5, 0) >= runs * per_run, 120, "10,000 tasks waiting on the level-5 lane"
        )
        assert set(backlog_by_level()) == {5}
        async with Worker(client, task_queue="acts", activities=[work], max_concurrent_activities=20):
            await wait_until(lambda: len(STARTED["bulk"]) >= 300, 60, "the worker to work through the backlog")
            await client.execute_workflow(One, "acts", "urgent", 1, id="urgent", task_queue="wf", result_timeout=60)
            ahead = len(STARTED["bulk"])
            (wait_ms, priority), *_ = STARTED["urgent"]
            print(
                f"level 1 behind {runs * per_run - ahead} waiting level-5 tasks: started {wait_ms:.0f} ms after dispatch"
            )
            assert wait_ms < 1000, f"the level-1 task waited {wait_ms:.0f} ms"
            assert ahead < runs * per_run - 1000, "the backlog was nearly drained: the test proves nothing"
            assert priority == Priority(priority_key=1)
            # the level-5 ones carry the run's priority (inherited), and all of them run, once each
            await asyncio.gather(*(h.result(timeout=240) for h in bulk))
    assert len(STARTED["bulk"]) == runs * per_run
    assert {p for _w, p in STARTED["bulk"]} == {Priority(priority_key=5)}


@workflow.defn
class Quick:
    @workflow.run
    async def run(self, kind: str, spin: int) -> str:
        STARTED[kind].append((0.0, None))
        sum(i * i for i in range(spin))  # a workflow task that takes a few ms of CPU
        return kind


async def test_a_first_level_run_is_not_behind_a_backlog_of_last_level_workflow_tasks(client, processors):
    """Workflow tasks have lanes too: 2,000 level-5 runs wait for a workflow worker; once it works
    through them, a level-1 run completes ahead of most of them."""
    processors.start()
    STARTED.clear()
    STARTED_AT.clear()
    n = 2000
    for first in range(0, n, 200):
        await asyncio.gather(
            *(
                client.start_workflow(Quick, "bulk", 100_000, id=f"quick-{i}", task_queue="wq", priority=5)
                for i in range(first, first + 200)
            )
        )
    async with Worker(client, task_queue="wq", workflows=[Quick], max_cached_workflows=100):
        await wait_until(lambda: len(STARTED["bulk"]) >= 100, 60, "the worker to work through the backlog")
        t0 = time.monotonic()
        assert (
            await client.execute_workflow(Quick, "urgent", 0, id="quick-urgent", task_queue="wq", priority=1)
            == "urgent"
        )
        took, ahead = time.monotonic() - t0, len(STARTED["bulk"])
        print(f"a level-1 run behind {n - ahead} level-5 workflow tasks completed in {took * 1000:.0f} ms")
        assert ahead < n - 500, "the backlog was nearly drained: the test proves nothing"
        await wait_until(lambda: len(STARTED["bulk"]) >= n, 120, "every level-5 run")


async def _small_waits(client, n: int, rate: float) -> list[float]:
    """Start ``n`` runs of the small tenant, ``rate`` a second; the ms each one's task waited."""
    before = len(STARTED["small"])
    handles = []
    for i in range(n):
        handles.append(
            await client.start_workflow(
                One,
                "fair",
                "small",
                0,
                id=f"small-{time.monotonic_ns()}-{i}",
                task_queue="wf",
                priority=Priority(fairness_key="small"),
            )
        )
        await asyncio.sleep(1 / rate)
    await asyncio.gather(*(h.result(timeout=120) for h in handles))
    return [w for w, _p in STARTED["small"][before:]]


def _slowest(waits: list[float], at: list[float], k: int = 5) -> str:
    """The ``k`` longest waits with the wall-clock time each task started (to set beside what
    else the machine was doing then)."""
    top = sorted(zip(waits, at, strict=True), reverse=True)[:k]
    return ", ".join(
        f"{w:.0f} ms at {time.strftime('%H:%M:%S', time.gmtime(t / 1000))}.{int(t % 1000):03d}" for w, t in top
    )


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


async def test_a_small_tenant_is_not_starved_by_a_big_tenants_burst(client, processors):
    processors.start()
    STARTED.clear()
    STARTED_AT.clear()
    async with (
        Worker(client, task_queue="wf", workflows=[Bulk, One]),
        # one slot, 10 ms a task: about 100 a second
        Worker(client, task_queue="fair", activities=[work], max_concurrent_activities=1),
    ):
        await _small_waits(client, 20, 10)  # warm up: topics, caches, connections
        unloaded = await _small_waits(client, 100, 10)
        # ten times the small tenant's load, at once: 1,000 tasks ahead of it on the queue (100
        # orders of 10 tasks each: a few runs with hundreds of pending activities each would make
        # the engine rewrite their large states on every completion, a load of its own)
        big = await asyncio.gather(
            *(
                client.start_workflow(
                    Bulk, "fair", "big", 10, 0.01, id=f"big-{i}", task_queue="wf", priority=Priority(fairness_key="big")
                )
                for i in range(100)
            )
        )
        await wait_until(lambda: len(STARTED["big"]) >= 50, 60, "the big tenant's burst to reach the worker")
        first = len(STARTED["small"])
        loaded = await _small_waits(client, 100, 10)
        loaded_at = STARTED_AT["small"][first:]
        big_left = 1000 - len(STARTED["big"])
        await asyncio.gather(*(h.result(timeout=120) for h in big))
    print(
        f"small tenant p99 wait: unloaded {_p99(unloaded):.1f} ms, beside the big tenant's burst "
        f"{_p99(loaded):.1f} ms ({big_left} big tasks still waiting after it); slowest: {_slowest(loaded, loaded_at)}"
    )
    assert big_left > 100, "the burst was over before the small tenant's tasks: the test proves nothing"
    # In arrival order the small tenant's tasks would wait behind the burst: ~10 s, hundreds of
    # times its unloaded wait. With fairness keys each waits for the next free slot (up to 10
    # ms here) on an engine that runs 100 tasks a second beside it: measured 1.8-2x its unloaded
    # p99 on this machine (`make bench`'s fairness scenario measures the ratio back to back, with
    # more samples). This bound is for a loaded CI machine: starvation fails it by far.
    assert _p99(loaded) < 4 * _p99(unloaded), (_p99(unloaded), _p99(loaded), _slowest(loaded, loaded_at))
