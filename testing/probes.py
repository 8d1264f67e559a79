"""How long each shard goes unserved: ``PartitionProbes`` asks the engine about a workflow of
every commands partition, a question every 0.2 s per partition (``describe`` of a workflow that
does not exist: the history processor's not-found reply is the answer timed), and tells afterwards
how long each partition went without an answer around a moment of your choosing (a failover, a
rolling restart, a rebalance). For drills against a real engine:

    probes = PartitionProbes(client, partitions=12)
    probes.start()
    t0 = time.monotonic(); kill_a_processor(); t1 = time.monotonic()
    ...
    await probes.stop()
    probes.unserved(t0, t1)    # {partition: longest seconds without an answer, ...}

``make chaos`` with ``CHAOS_CLUSTER=1`` and ``make bench --only rebalance`` report with it.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

from kadence import Client, KadenceError, WorkflowNotFoundError
from kadence.topics.partitioner import partition_for

__all__ = ["MAX_OUTSTANDING", "PartitionProbes"]

#: questions a partition's prober may have waiting for an answer at once
MAX_OUTSTANDING = 300


class PartitionProbes:
    """One prober per commands partition: asks ``describe`` of a workflow that does not exist
    and hashes to the partition every ``pause_s`` (the processor's not-found reply is the answer
    timed). Unanswered questions add up to ``MAX_OUTSTANDING`` a partition during an outage; each
    costs the engine a command, so a probe is a light load of its own (5 a second a partition)."""

    def __init__(self, client: Client, partitions: int, *, pause_s: float = 0.2) -> None:
        self.client = client
        self.ids = {
            p: next(f"probe-{p}-{i}" for i in range(100_000) if partition_for(f"probe-{p}-{i}", partitions) == p)
            for p in range(partitions)
        }
        #: partition -> [(sent, answered)] (monotonic)
        self.answers: dict[int, list[tuple[float, float]]] = {p: [] for p in self.ids}
        self._tasks: list[asyncio.Task[Any]] = []
        self.pause_s = pause_s

    async def _ask(self, partition: int) -> None:
        sent = time.monotonic()
        try:
            await self.client.get_workflow_handle(self.ids[partition]).describe(timeout=60)
        except WorkflowNotFoundError:
            self.answers[partition].append((sent, time.monotonic()))
        except KadenceError:
            pass

    async def _probe(self, partition: int) -> None:
        """A new question every ``pause_s``, whether the earlier ones were answered or not (at
        most ``MAX_OUTSTANDING`` waiting): a question asked during an outage waits for its
        answer, and must not delay the first question asked after the outage."""
        outstanding: set[asyncio.Task[Any]] = set()
        try:
            while True:
                if len(outstanding) < MAX_OUTSTANDING:
                    task = asyncio.get_running_loop().create_task(self._ask(partition))
                    outstanding.add(task)
                    task.add_done_callback(outstanding.discard)
                await asyncio.sleep(self.pause_s)
        finally:
            for task in outstanding:
                task.cancel()
            await asyncio.gather(*outstanding, return_exceptions=True)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._probe(p)) for p in self.ids]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def recovery(self, since: float) -> dict[int, float | None]:
        """Per partition: seconds from ``since`` to the first answer to a question asked after it
        (None: none came)."""
        out: dict[int, float | None] = {}
        for p, answers in self.answers.items():
            done = [answered for sent, answered in answers if sent >= since]
            out[p] = round(min(done) - since, 2) if done else None
        return out

    def unserved(self, start: float, end: float) -> dict[int, float | None]:
        """Per partition: the longest time without an answer from ``start`` (a fault began) until
        the first answer to a question asked after ``end`` (it ended): how long the partition
        went unserved around the fault (None: it never answered again)."""
        out: dict[int, float | None] = {}
        for p, answers in self.answers.items():
            after = [answered for sent, answered in answers if sent >= end]
            if not after:
                out[p] = None
                continue
            back = min(after)
            times = [start, *sorted(a for _s, a in answers if start < a < back), back]
            out[p] = round(max(b - a for a, b in itertools.pairwise(times)), 2)
        return out
