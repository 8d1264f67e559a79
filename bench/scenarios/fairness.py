"""Scenario ``fairness`` (issue 46 item 4, decision 0060): a small tenant's wait for its activity
tasks on a saturated queue, alone and beside a big tenant's burst of ten times its load, with
and without fairness keys, in alternating windows of one engine (``KADENCE_BENCH_FAIRNESS_ROUNDS``
rounds, default 2). The activity worker runs in this process with one slot and 10 ms tasks
(about 100 a second); the small tenant starts 20 one-activity runs a second for
``KADENCE_BENCH_FAIRNESS_SECONDS`` (default 10), the big tenant ten times as many tasks at once.
A wait is the activity's start minus its dispatch (``activity.info().scheduled_time_ms``).
Reported: the small tenant's p50/p99 wait per window and the fair/alone and unfair/alone ratios
paired by round, and the fair p99's excess over alone in slot turnovers (the median time between
task starts while the small tenant ran: a task on a full queue waits for a running one to end,
whatever the order). The issue's target: fair p99 under 2x alone."""

from __future__ import annotations

import asyncio
import collections
import itertools
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
#: the monotonic time (s) each task started, of every kind
STARTS: list[float] = []


@activity.defn(name="bench_fair_task")
async def fair_task(kind: str, sleep_s: float) -> None:
    WAITS[kind].append(time.time() * 1000 - activity.info().scheduled_time_ms)
    STARTS.append(time.monotonic())
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
    t_start = time.monotonic()
    t_end = t_start + seconds
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
    # the slot's turnover: how often a task started while the small tenant's ran (the wait no
    # order can avoid on a full queue: the running task's end)
    during = [t for t in STARTS if t_start <= t <= t_end]
    turnover = summary([1000 * (b - a) for a, b in itertools.pairwise(during)])["p50"] if len(during) > 2 else None
    return {
        "p50_ms": waits["p50"],
        "p99_ms": waits["p99"],
        "tasks": len(WAITS[kind]),
        "big_left_after": big_left,
        "turnover_ms": turnover,
    }


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
    # the fair p99's excess over alone, in slot turnovers (about 1: the running task's end)
    excess = [
        round((f["p99_ms"] - a["p99_ms"]) / f["turnover_ms"], 2)
        for f, a in zip(runs["fair"], runs["alone"], strict=True)
        if f["turnover_ms"]
    ]
    fair, unfair = ratios["fair"]["p99_ms"] or {}, ratios["unfair"]["p99_ms"] or {}
    ctx.update(task, f"[green]small tenant p99 fair/alone x{fair.get('mean')}, unfair/alone x{unfair.get('mean')}[/]")
    return {
        "runs": runs,
        "fair_over_alone": ratios["fair"],
        "unfair_over_alone": ratios["unfair"],
        "fair_p99_excess_in_turnovers": excess,
        "rounds": rounds,
        "seconds": seconds,
    }
