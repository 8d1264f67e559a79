"""Scenario ``requests`` (issue 45 item 3): the requests the broker serves per workflow, by API
key, and the CPU per workflow of every process, for the 3-activity workflow at 1, 8 and 512 in
flight and for 3 local activities with an eager start at 1; and the requests an idle engine
makes per second (the fetches, heartbeats and metadata that carry no record).

Each level: a warm-up, then a reading of the broker's request counters (``bench.broker_requests``,
over JMX), the load for half a window, its workflows drained, a second reading. Requests during
the readings themselves (a second or two, the load stopped) are counted too; the idle rate says
how many those are."""

from __future__ import annotations

import asyncio
import time

from kadence import Worker

from .. import workloads
from ..broker_requests import BrokerRequests, per_workflow
from ..common import QUEUE, Context, CpuMeter, cpu_per_workflow, summary
from ..engine import engine
from ..load import Recorder, closed_loop

LEVELS = (1, 8, 512)


async def _level(ctx: Context, task, eng, meter: BrokerRequests, wf, concurrency: int, label: str, eager: bool) -> dict:
    s = ctx.settings
    loop = asyncio.get_running_loop()
    warm = Recorder()
    ctx.update(task, f"{label}: warm-up")
    await closed_loop(eng.client, wf, warm, concurrency=concurrency, until=time.monotonic() + s.warmup, eager=eager)
    before = await loop.run_in_executor(None, meter.snapshot)
    rec = Recorder()
    cpu = CpuMeter(eng.pids())
    cpu.start()
    t0 = time.monotonic()
    ctx.update(task, f"{label}: measuring")
    await closed_loop(eng.client, wf, rec, concurrency=concurrency, until=t0 + s.seconds / 2, eager=eager)
    elapsed = time.monotonic() - t0
    usage = cpu.stop()
    after = await loop.run_in_executor(None, meter.snapshot)
    done = len(rec.done)
    cpu_ms = cpu_per_workflow(usage, elapsed, done)
    if done and "bench" in usage:  # the client's process: an eager start's first task runs there
        cpu_ms["client"] = round(usage["bench"] / 100 * elapsed * 1000 / done, 2)
        cpu_ms["all"] = round(cpu_ms["engine"] + cpu_ms.get("broker", 0) + cpu_ms["client"], 2)
    return {
        "in_flight": concurrency,
        "workflows": done,
        "start_to_close": summary([(d.finished - d.started) * 1000 for d in rec.done]),
        "wf_per_s": round(done / elapsed, 1),
        "errors": len(rec.errors),
        "requests_per_workflow": per_workflow(before, after, done),
        "cpu_ms_per_workflow": cpu_ms,
    }


async def run(ctx: Context) -> dict:
    s = ctx.settings
    task = ctx.task("requests")
    meter = BrokerRequests()
    if not meter.available:
        return {"error": "no KADENCE_BROKER_JMX_PORT: run under scripts/devstack.py (make bench)"}
    loop = asyncio.get_running_loop()
    out: dict = {}
    async with engine(ctx, "requests") as eng:
        # idle: what the engine asks of the broker with nothing to do
        ctx.update(task, "idle")
        await asyncio.sleep(s.warmup)
        before = await loop.run_in_executor(None, meter.snapshot)
        t0 = time.monotonic()
        await asyncio.sleep(s.seconds / 2)
        after = await loop.run_in_executor(None, meter.snapshot)
        seconds = time.monotonic() - t0
        idle = {k: round((after.get(k, 0) - before.get(k, 0)) / seconds, 1) for k in after}
        out["idle_requests_per_s"] = {k: v for k, v in sorted(idle.items(), key=lambda kv: -kv[1]) if v >= 0.1}
        for n in LEVELS:
            out[f"three_activities_{n}"] = await _level(
                ctx, task, eng, meter, workloads.ThreeActivities, n, f"3 activities, {n} in flight", False
            )
        async with Worker(
            eng.client, task_queue=QUEUE, workflows=[workloads.ThreeLocal], activities=[workloads.noop]
        ) as local:
            await local.wait_started(60)
            out["three_local_eager_1"] = await _level(
                ctx, task, eng, meter, workloads.ThreeLocal, 1, "3 local activities, eager start", True
            )
    return out
