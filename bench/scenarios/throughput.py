"""Scenario 1: workflows completed per second, closed loop, for three workflow shapes.

Per shape, one engine (fresh namespace). A short probe at each concurrency of
``KADENCE_BENCH_CONCURRENCY`` (default 32,64,128,256,512 workflows in flight) finds the best level;
the measurement window (``KADENCE_BENCH_SECONDS``) then runs at that level. Each window starts
after a warm-up of at least ``KADENCE_BENCH_WARMUP`` and until every loop completed a workflow
(steady state); between levels the loops stop starting workflows and the running ones drain."""

from __future__ import annotations

import asyncio
import os
import time

from .. import workloads
from ..common import BenchError, Context, CpuMeter, metric_delta
from ..engine import count_records, engine, output_topics
from ..load import Recorder, closed_loop

SHAPES = {
    # name: (workflow, signal sent after the start)
    "one_activity": (workloads.OneActivity, None),
    "three_activity": (workloads.ThreeActivities, None),
    "ten_step": (workloads.TenSteps, "proceed"),
    # scenario ``payloads`` runs these; this scenario does not (THROUGHPUT_SHAPES)
    "three_typed": (workloads.ThreeTyped, None),
    "three_dict": (workloads.ThreeDict, None),
}
#: what this scenario runs unless KADENCE_BENCH_SHAPES says otherwise
THROUGHPUT_SHAPES = ("one_activity", "three_activity", "ten_step")


async def window(ctx: Context, task, eng, name: str, concurrency: int, seconds: float, label: str) -> dict:
    s = ctx.settings
    wf, signal = SHAPES[name]
    rec = Recorder()
    stop = asyncio.Event()
    t_start = time.monotonic()
    warm_min, warm_max = t_start + s.warmup, t_start + s.warmup + 60
    runner = asyncio.create_task(closed_loop(eng.client, wf, rec, concurrency=concurrency, stop=stop, signal=signal))
    cpu = CpuMeter(eng.pids())
    m0 = None
    wall0 = 0.0
    w0 = w1 = float("inf")
    try:
        while True:
            now = time.monotonic()
            if m0 is None and now >= warm_min and (len(rec.done) >= concurrency or now >= warm_max):
                m0, wall0 = eng.procs.metrics(), time.time() * 1000
                cpu.start()
                w0, w1 = now, now + seconds
            if now >= w1:
                break
            phase = "warm-up" if now < w0 else f"{now - w0:.0f}/{seconds:.0f}s"
            recent = len(rec.completed_between(now - 1, now))
            ctx.update(
                task,
                f"{label} x{concurrency} {phase}  completed {len(rec.done)}  in flight {rec.inflight}"
                f"  ~{recent} wf/s  errors {len(rec.errors)}",
            )
            eng.procs.check_alive()
            await asyncio.sleep(max(0.0, min(0.25, w1 - now)))
        m1, wall1 = eng.procs.metrics(), time.time() * 1000
        usage = cpu.stop()
    finally:
        stop.set()
        ctx.update(task, f"{label} x{concurrency} draining {rec.inflight} in flight")
        await asyncio.wait({runner}, timeout=60)
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
    done = rec.completed_between(w0, w1)
    commands = metric_delta(m0, m1, "kadence_processor_commands_total")
    batches = metric_delta(m0, m1, "kadence_processor_batch_size_count")
    commit_s = metric_delta(m0, m1, "kadence_processor_commit_seconds_sum")
    elapsed = (wall1 - wall0) / 1000
    return {
        "wf_per_s": round(len(done) / seconds, 1),
        "completed": len(done),
        "errors": len(rec.errors),
        "error_sample": rec.errors[:3],
        "concurrency": concurrency,
        "warmup_s": round(w0 - t_start, 1),
        "commands_per_s": round(commands / elapsed, 1),
        "commands_per_wf": round(commands / len(done), 2) if done else None,
        "mean_batch": round(commands / batches, 1) if batches else None,
        "transactions_per_s": round(batches / elapsed, 1),
        "mean_commit_ms": round(1000 * commit_s / batches, 2) if batches else None,
        "cpu_percent_of_core": usage,
        "_wall": (wall0, wall1),
    }


async def measure(ctx: Context, name: str) -> dict:
    s = ctx.settings
    task = ctx.task(f"throughput/{name}")
    levels = s.concurrency_levels
    async with engine(ctx, f"tp-{name}") as eng:
        sweep = {}
        if len(levels) > 1:
            probe = max(3.0, s.seconds / 4)
            for c in levels:
                r = await window(ctx, task, eng, name, c, probe, "probe")
                sweep[c] = r["wf_per_s"]
            best = max(sweep, key=sweep.get)
        else:
            best = levels[0]
        result = await window(ctx, task, eng, name, best, s.seconds, "measure")
        wall0, wall1 = result.pop("_wall")
        ctx.update(task, f"{result['wf_per_s']} wf/s at x{best}; counting records")
        topics = output_topics(eng.config)
        counts = await asyncio.get_running_loop().run_in_executor(
            None, count_records, eng.config, [t for ts in topics.values() for t in ts], wall0, wall1
        )
    per_kind = {k: sum(counts[t] for t in ts) for k, ts in topics.items()}
    elapsed = (wall1 - wall0) / 1000
    outputs = sum(v for k, v in per_kind.items() if k != "commands")
    done = result["completed"]
    result.update(
        {
            "sweep_wf_per_s": sweep,
            "history_events_per_s": round(per_kind["history"] / elapsed, 1),
            "records_out_per_s": round(outputs / elapsed, 1),
            "events_per_wf": round(per_kind["history"] / done, 2) if done else None,
            "records_out_per_command": round(outputs / (result["commands_per_s"] * elapsed), 2)
            if result["commands_per_s"]
            else None,
            "records_in_window": per_kind,
        }
    )
    ctx.update(
        task,
        f"[green]{result['wf_per_s']} wf/s[/] at x{best} (sweep {sweep})  {result['commands_per_s']} "
        f"cmd/s  {result['history_events_per_s']} events/s  batch {result['mean_batch']}",
    )
    return result


async def run(ctx: Context, shapes=None) -> dict:
    """Every shape, or those named in ``KADENCE_BENCH_SHAPES`` (comma-separated), in order."""
    if shapes is None:
        raw = os.environ.get("KADENCE_BENCH_SHAPES", "").strip()
        shapes = [n.strip() for n in raw.split(",") if n.strip()] if raw else list(THROUGHPUT_SHAPES)
    unknown = [n for n in shapes if n not in SHAPES]
    if unknown:
        raise BenchError(f"KADENCE_BENCH_SHAPES: unknown shape(s) {', '.join(unknown)}; known: {', '.join(SHAPES)}")
    return {name: await measure(ctx, name) for name in shapes}
