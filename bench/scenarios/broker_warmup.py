"""Before any measurement: load the broker until its JIT compiler has settled.

A freshly started Kafka broker spends most of its first minute of load compiling: measured on
this machine with the 3-activity load, its C1/C2 compiler threads used 58 % of a core in the
first 10 s, 37 % in the next, then 10 %, 8 % and 3 %, while the broker as a whole fell from
122 % to 52 % of a core for the same work. A production broker runs warm for weeks, so every
scenario is measured against a warm one: this phase runs the 3-activity closed loop in a
throwaway namespace until the compiler threads use less than ``SETTLED_PERCENT`` of a core over
a ``SAMPLE_S`` sample (at least ``MIN_S``, at most ``KADENCE_BENCH_BROKER_WARMUP`` seconds,
default 120; 0 skips it). When the broker is not a process on this machine (given by
``KADENCE_KAFKA_BOOTSTRAP``), its threads cannot be read and the phase runs for the maximum."""

from __future__ import annotations

import asyncio
import os
import time

import psutil

from .. import workloads
from ..common import BenchError, Context, broker_process, env_float
from ..engine import engine
from ..load import Recorder, closed_loop

MIN_S = 20.0
SAMPLE_S = 5.0
SETTLED_PERCENT = 10.0


def compiler_cpu_seconds(proc: psutil.Process) -> float | None:
    """CPU seconds used so far by the JVM's JIT compiler threads (Linux /proc), or None."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    try:
        for tid in os.listdir(f"/proc/{proc.pid}/task"):
            try:
                with open(f"/proc/{proc.pid}/task/{tid}/comm") as f:
                    if "CompilerThre" not in f.read():
                        continue
                with open(f"/proc/{proc.pid}/task/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / tick
            except (OSError, IndexError, ValueError):
                continue  # a thread that ended meanwhile
    except OSError:
        return None
    return total


async def run(ctx: Context) -> dict:
    limit = env_float("KADENCE_BENCH_BROKER_WARMUP", 120.0)
    if limit < 0:
        raise BenchError("KADENCE_BENCH_BROKER_WARMUP must be >= 0")
    task = ctx.task("broker warm-up")
    if limit == 0:
        ctx.update(task, "skipped (KADENCE_BENCH_BROKER_WARMUP=0)")
        return {"skipped": True}
    broker = broker_process(ctx.settings.bootstrap)
    samples: list[float] = []
    rec = Recorder()
    stop = asyncio.Event()
    t0 = time.monotonic()
    async with engine(ctx, "warmup") as eng:
        runner = asyncio.create_task(
            closed_loop(eng.client, workloads.ThreeActivities, rec, concurrency=128, stop=stop)
        )
        try:
            last = compiler_cpu_seconds(broker) if broker is not None else None
            while True:
                await asyncio.sleep(SAMPLE_S)
                eng.procs.check_alive()
                elapsed = time.monotonic() - t0
                now = compiler_cpu_seconds(broker) if broker is not None else None
                share = None
                if now is not None and last is not None:
                    share = 100 * (now - last) / SAMPLE_S
                    samples.append(round(share, 1))
                last = now
                shown = "unknown (broker not on this machine)" if share is None else f"{share:.0f}% of a core"
                ctx.update(task, f"{elapsed:.0f}s  JIT compiler {shown}  completed {len(rec.done)}")
                if elapsed >= limit or (share is not None and elapsed >= MIN_S and share < SETTLED_PERCENT):
                    break
        finally:
            stop.set()
            await asyncio.wait({runner}, timeout=60)
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
    seconds = round(time.monotonic() - t0, 1)
    settled = bool(samples) and samples[-1] < SETTLED_PERCENT
    ctx.update(
        task,
        f"[green]{seconds}s[/], JIT compiler samples {samples} % of a core" + ("" if settled else " (not settled)"),
    )
    return {"seconds": seconds, "compiler_percent_samples": samples, "settled": settled, "workflows": len(rec.done)}
