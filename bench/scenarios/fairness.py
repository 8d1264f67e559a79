"""Scenario ``fairness`` (issue 46 item 4, decision 0060): a small tenant's wait for its activity
tasks on a saturated queue, alone and beside a big tenant's burst of ten times its load, with
and without fairness keys, in alternating windows of one engine (``KADENCE_BENCH_FAIRNESS_ROUNDS``
rounds, default 2). The activity worker runs in this process with one slot and 10 ms tasks
(about 100 a second); the small tenant starts 20 one-activity runs a second for
``KADENCE_BENCH_FAIRNESS_SECONDS`` (default 10), the big tenant ten times as many tasks at once.
A wait is the activity's start minus its dispatch (``activity.info().scheduled_time_ms``).
Reported: the small tenant's p50/p99 wait per window and the fair/alone and unfair/alone ratios
paired by round. The issue's target: fair p99 under 2x alone."""

from __future__ import annotations

import asyncio
import collections
import os
import time
import uuid
from datetime import timedelta

from kadence import Priority, Worker, activity, workflow

from ..common import Context, paired_ratios, summary
from ..engine import engine

MODES = ("alone", "fair", "unfair")
TIMEOUT = timedelta(minutes=10)
#: kind -> ms each task of that kind waited, in start order
WAITS: dict[str, list[float]] = collections.defaultdict(list)


@activity.defn(name="bench_fair_task")
async def fair_task(kind: str, sleep_s: float) -> None:
    WAITS[kind].append(time.time() * 1000 - activity.info().scheduled_time_ms)
    await asyncio.sleep(sleep_s)


@workflow.defn(name="BenchFairBurst")
class Burst:
    @workflow.run
    async def run(self, kind: str, n: int) -> int:
        await asyncio.gather(
            *(
                workflow.execute_activity(
                    fair_task, kind, 0.01, task_queue="bench-fair", start_to_close_timeout=TIMEOUT
                )
                for _ in range(n)
            )
        )
        return n


@workflow.defn(name="BenchFairOne")
class One:
    @workflow.run
    async def run(self, kind: str) -> None:
        await workflow.execute_activity(fair_task, kind, 0.0, task_queue="bench-fair", start_to_close_timeout=TIMEOUT)


async def _window(ctx: Context, task, client, mode: str, seconds: float, label: str) -> dict:
    rate, kind = 20, f"small-{mode}-{uuid.uuid4().hex[:6]}"
    fair, big = mode == "fair", int(10 * rate * seconds)
    bursts = []
    if mode != "alone":
        # ten times the small tenant's tasks, at once, as orders of 10 tasks each (a few runs of
        # hundreds of pending activities would make the engine rewrite large states all along)
        bursts = await asyncio.gather(
            *(
                client.start_workflow(
                    Burst,
                    f"big-{kind}",
                    10,
                    id=f"burst-{kind}-{i}",
                    task_queue="bench-flows",
                    priority=Priority(fairness_key="big") if fair else None,
                )
                for i in range(big // 10)
            )
        )
        for _ in range(2400):  # until the burst has reached the worker (2 minutes at most)
            if len(WAITS[f"big-{kind}"]) >= 50:
                break
            await asyncio.sleep(0.05)
    handles = []
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        handles.append(
            await client.start_workflow(
                One,
                kind,
                id=f"{kind}-{len(handles)}",
                task_queue="bench-flows",
                priority=Priority(fairness_key="small") if fair else None,
            )
        )
        ctx.update(task, f"{label}: {len(WAITS[kind])} small tasks started")
        await asyncio.sleep(1 / rate)
    await asyncio.gather(*(h.result(timeout=600) for h in handles))
    big_left = 0
    if bursts:
        big_left = big - len(WAITS[f"big-{kind}"])
        await asyncio.gather(*(h.result(timeout=600) for h in bursts))
    waits = summary(WAITS[kind])
    return {"p50_ms": waits["p50"], "p99_ms": waits["p99"], "tasks": len(WAITS[kind]), "big_left_after": big_left}


async def run(ctx: Context) -> dict:
    rounds = int(os.environ.get("KADENCE_BENCH_FAIRNESS_ROUNDS", "2"))
    seconds = float(os.environ.get("KADENCE_BENCH_FAIRNESS_SECONDS", "10"))
    task = ctx.task("fairness")
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    async with engine(ctx, "fairness", workers=1) as eng:  # the engine-ready check runs on it
        async with (
            Worker(eng.client, task_queue="bench-flows", workflows=[Burst, One]),
            Worker(eng.client, task_queue="bench-fair", activities=[fair_task], max_concurrent_activities=1),
        ):
            await _window(ctx, task, eng.client, "alone", 2, "warm-up")
            for round_ in range(rounds):
                for mode in MODES:
                    runs[mode].append(await _window(ctx, task, eng.client, mode, seconds, f"{mode} round {round_ + 1}"))
    ratios = {m: {k: paired_ratios(runs, k, "alone").get(m) for k in ("p50_ms", "p99_ms")} for m in MODES[1:]}
    fair, unfair = ratios["fair"]["p99_ms"] or {}, ratios["unfair"]["p99_ms"] or {}
    ctx.update(task, f"[green]small tenant p99 fair/alone x{fair.get('mean')}, unfair/alone x{unfair.get('mean')}[/]")
    return {
        "runs": runs,
        "fair_over_alone": ratios["fair"],
        "unfair_over_alone": ratios["unfair"],
        "rounds": rounds,
        "seconds": seconds,
    }
