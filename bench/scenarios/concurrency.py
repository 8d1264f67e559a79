"""Scenario ``concurrency`` (issue 46 item 2, decision 0057): the 3-activity workflow, closed loop
at ``KADENCE_BENCH_CONCURRENCY_LEVEL`` in flight (default 128), without and with a concurrency
limit on every start (``Limit("key", k, max=1)`` over 1,000 keys: each start takes a slot from
the shard that owns its key and gives it back at its close), in alternating windows of one
engine (``KADENCE_BENCH_CONCURRENCY_ROUNDS`` rounds, default 2), and with a rate limit that never
binds (``Limit("rate", k, max=1000, per=1 s)`` over the same keys: the cost of an admission, issue
46 item 3, decision 0058). Reported: workflows per second and start-to-result latency per window,
and limited/unlimited and rated/unlimited ratios paired by round. The issue's target: the limited
throughput within 15 % of the unlimited."""

from __future__ import annotations

import asyncio
import os
import time
from datetime import timedelta

from kadence import Limit

from .. import workloads
from ..common import Context, paired_ratios, summary
from ..engine import engine
from ..load import Recorder, closed_loop

KEYS = 1000
MODES = ("unlimited", "limited", "rated")


def _limited(loop: int, n: int) -> dict:
    return {"concurrency": [Limit("key", f"k{(loop * 7919 + n) % KEYS}", max=1)]}


def _rated(loop: int, n: int) -> dict:
    return {"concurrency": [Limit("rate", f"k{(loop * 7919 + n) % KEYS}", max=1000, per=timedelta(seconds=1))]}


async def _window(ctx: Context, task, eng, mode: str, level: int, label: str) -> dict:
    s = ctx.settings
    rec, stop = Recorder(), asyncio.Event()
    options = {"limited": _limited, "rated": _rated}.get(mode)
    runner = asyncio.create_task(
        closed_loop(eng.client, workloads.ThreeActivities, rec, concurrency=level, stop=stop, options=options)
    )
    t0 = time.monotonic()
    w0, w1 = t0 + s.warmup, t0 + s.warmup + s.seconds
    try:
        while (now := time.monotonic()) < w1:
            phase = "warm-up" if now < w0 else f"{now - w0:.0f}/{s.seconds:.0f}s"
            ctx.update(task, f"{label} {phase} completed {len(rec.done)} errors {len(rec.errors)}")
            eng.procs.check_alive()
            await asyncio.sleep(0.25)
    finally:
        stop.set()
        await asyncio.wait({runner}, timeout=60)
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
    done = rec.completed_between(w0, w1)
    return {
        "wf_per_s": round(len(done) / s.seconds, 1),
        "p50_ms": summary([(d.finished - d.started) * 1000 for d in done])["p50"],
        "p99_ms": summary([(d.finished - d.started) * 1000 for d in done])["p99"],
        "errors": len(rec.errors),
        "error_sample": rec.errors[:3],
    }


async def run(ctx: Context) -> dict:
    rounds = int(os.environ.get("KADENCE_BENCH_CONCURRENCY_ROUNDS", "2"))
    level = int(os.environ.get("KADENCE_BENCH_CONCURRENCY_LEVEL", "128"))
    task = ctx.task("concurrency")
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    async with engine(ctx, "concurrency") as eng:
        for round_ in range(rounds):
            for mode in MODES:
                runs[mode].append(await _window(ctx, task, eng, mode, level, f"{mode} round {round_ + 1}"))
    ratios = {
        m: {k: paired_ratios(runs, k, "unlimited").get(m) for k in ("wf_per_s", "p50_ms", "p99_ms")} for m in MODES[1:]
    }
    wf, rated = ratios["limited"]["wf_per_s"] or {}, ratios["rated"]["wf_per_s"] or {}
    ctx.update(task, f"[green]limited/unlimited throughput x{wf.get('mean')}, rated x{rated.get('mean')}[/]")
    return {
        "runs": runs,
        "limited_over_unlimited": ratios["limited"],
        "rated_over_unlimited": ratios["rated"],
        "level": level,
        "keys": KEYS,
        "rounds": rounds,
    }
