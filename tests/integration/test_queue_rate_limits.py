"""Task-queue rate limits on the real broker (issue 46 item 1, decision 0055): a queue's limit holds
across all its workers (each paces its share of the activity-task partitions), a change or a
lift applies to running workers within about a second, a limit on one activity type lets the
others pass, and a task held back waits in the backlog: none is lost or run twice."""

from __future__ import annotations

import asyncio
import collections
import time
from datetime import timedelta

from kadence import Worker, activity, workflow
from kadence.topics.queue_limits import read_queue_limits, set_queue_limit

from .conftest import wait_until

#: (workflow ID, activity index) -> monotonic start times, for every execution
starts: dict[tuple[str, int], list[float]] = collections.defaultdict(list)


@activity.defn
async def tick(key: list) -> int:
    starts[(key[0], key[1])].append(time.monotonic())
    return key[1]


@activity.defn
async def mail(n: int) -> int:
    starts[("mail", n)].append(time.monotonic())
    return n


@workflow.defn
class Fanout:
    @workflow.run
    async def run(self, n: int) -> int:
        wid = workflow.info().workflow_id
        timeout = timedelta(seconds=60)
        done = await asyncio.gather(
            *(workflow.execute_activity(tick, [wid, i], start_to_close_timeout=timeout) for i in range(n))
        )
        return sum(done)


@workflow.defn
class Mixed:
    @workflow.run
    async def run(self, n: int) -> int:
        timeout = timedelta(seconds=60)
        ticks = [workflow.execute_activity(tick, ["mixed", i], start_to_close_timeout=timeout) for i in range(n)]
        mails = [workflow.execute_activity(mail, i, start_to_close_timeout=timeout) for i in range(n)]
        return sum(await asyncio.gather(*ticks, *mails))


def _started_between(t0: float, t1: float) -> int:
    return sum(1 for times in starts.values() for t in times if t0 <= t < t1)


async def test_a_queue_limit_of_20_a_second_holds_within_10_percent_over_30_s_with_4_workers(
    client, processors, kafka_config
):
    processors.start()
    starts.clear()
    limit = await asyncio.to_thread(set_queue_limit, kafka_config, "q", 20, identity="test", reason="downstream")
    assert read_queue_limits(kafka_config)["q"] == limit
    n_workflows, per_workflow = 100, 20
    workers = [
        Worker(client, task_queue="q", workflows=[Fanout] if i == 0 else [], activities=[tick]) for i in range(4)
    ]
    for w in workers:
        await w.__aenter__()
    try:
        for w in workers:
            await w.wait_started(60)

        def spread() -> bool:  # the group has given each worker its partitions (of each priority lane)
            owned = [w._at_consumer._owned for w in workers if w._at_consumer is not None]
            lanes = len(workers[0]._at_consumer.topics) if workers[0]._at_consumer is not None else 0
            return len(owned) == 4 and all(owned) and sum(len(o) for o in owned) == 4 * lanes

        # before any task: a rebalance while tasks run may run one twice (activities are at least
        # once; its result is recorded once), which this test's count of executions would see
        await wait_until(spread, 60, "the four workers to share the activity-task partitions")
        handles = [
            await client.start_workflow(Fanout, per_workflow, id=f"rl-{i}", task_queue="q") for i in range(n_workflows)
        ]
        await wait_until(lambda: _started_between(0, time.monotonic()) > 20, 30, "the first activities")
        t0 = time.monotonic() + 1.0
        await asyncio.sleep(31.5)
        ran = _started_between(t0, t0 + 30)
        print(f"rate limit 20/s, 4 workers: {ran} activities started in 30 s ({ran / 30:.2f}/s)")
        # 20 a second, across the four workers: 600 in 30 s, within 10 %
        assert 540 <= ran <= 660, f"{ran} activities started in 30 s under a limit of 20/s"
        assert sum(w.stats["eager_activities_asked"] for w in workers) == 0  # a paced queue runs nothing eagerly
        assert sum(w._activity_tasks.limiter.throttled for w in workers) > 0

        # lifting the limit: the running workers drain the rest at once; every activity ran once
        await asyncio.to_thread(set_queue_limit, kafka_config, "q", identity="test", reason="lifted")
        results = await asyncio.gather(*(h.result(timeout=120) for h in handles))
        assert results == [sum(range(per_workflow))] * n_workflows
        assert len(starts) == n_workflows * per_workflow
        assert all(len(times) == 1 for times in starts.values())
        assert not read_queue_limits(kafka_config)["q"].limited
    finally:
        for w in workers:
            await w.__aexit__(None, None, None)


async def test_a_limit_on_one_activity_type_lets_the_others_pass_and_a_change_applies_at_once(
    client, processors, kafka_config
):
    processors.start()
    starts.clear()
    await asyncio.to_thread(set_queue_limit, kafka_config, "q", None, {"tick": 2}, identity="test")
    async with Worker(client, task_queue="q", workflows=[Mixed], activities=[tick, mail]) as worker:
        t0 = time.monotonic()
        handle = await client.start_workflow(Mixed, 30, id="mixed", task_queue="q")
        await wait_until(lambda: sum(1 for k in starts if k[0] == "mail") == 30, 30, "every mail activity")
        mails_done = time.monotonic() - t0
        ticks = sum(1 for k in starts if k[0] == "mixed")
        # 2 ticks a second: the mails did not wait behind them
        assert ticks <= 2 * mails_done + 2, (ticks, mails_done)
        assert ticks < 30
        await asyncio.to_thread(set_queue_limit, kafka_config, "q", None, {"tick": 500}, identity="test")
        assert await handle.result(timeout=30) == 2 * sum(range(30))
        assert worker.stats["eager_activities_asked"] == 30  # the mails: not paced, so eager
    assert all(len(times) == 1 for times in starts.values())
