"""A workflow task too large for one Kafka record (a long history a worker must replay, a burst
of signals) goes without its events, and the worker reads them from the history topic
(``KADENCE_PROCESSOR_TASK_MAX_BYTES``). Before, the processor's transaction failed on the
broker's "Message size too large", was retried, and failed again: the whole partition stalled
(found by the hot-workflow benchmark). The limit is made small here so that a few dozen signals
reach it."""

from __future__ import annotations

import asyncio

from kadence import Worker, workflow

QUEUE = "large-tasks"
LIMIT = 4_000
PAD = "x" * 200  # each signal's event is over 200 bytes: 20 of them are over the limit


@workflow.defn
class Collector:
    def __init__(self) -> None:
        self.items: list[int] = []
        self.done = False

    @workflow.signal
    def add(self, n: int, _pad: str) -> None:
        self.items.append(n)

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.query
    def count(self) -> int:
        return len(self.items)

    @workflow.run
    async def run(self) -> list[int]:
        await workflow.wait_condition(lambda: self.done)
        return self.items


async def test_tasks_over_the_limit_read_their_events_from_the_history_topic(client, processors):
    processors.start(env={"KADENCE_PROCESSOR_TASK_MAX_BYTES": str(LIMIT)})
    handle = await client.start_workflow(Collector, id="large-task", task_queue=QUEUE)
    # no worker yet: 40 signals wait in the history, and the first task carries all of them
    await asyncio.gather(*(handle.signal(Collector.add, n, PAD) for n in range(40)))
    async with Worker(client, task_queue=QUEUE, workflows=[Collector]) as worker:
        async with asyncio.timeout(60):
            while await handle.query(Collector.count) != 40:  # a query's task is over the limit too
                await asyncio.sleep(0.1)
        # more signals while the worker has the run cached (tasks over the limit are applied to
        # the cached instance: tests/unit/test_task_history.py), then the close
        await asyncio.gather(*(handle.signal(Collector.add, n, PAD) for n in range(40, 80)))
        await handle.signal(Collector.finish)
        result = await handle.result(timeout=60)
        # at least the query's task and the one that carried the 40 signals recorded before the
        # worker came (its first task had only the start)
        assert worker.stats["tasks_read_from_history"] >= 2, dict(worker.stats)
    assert sorted(result) == list(range(80)), result  # each signal seen once
    kinds = [e["type"] for e in await handle.history()]
    assert kinds.count("WorkflowSignaled") == 81
