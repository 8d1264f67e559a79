"""Scenario 2: per-step latency of a 3-activity workflow, at light load (one workflow at a time)
and at about half the measured maximum throughput (open loop, fixed start rate).

Per workflow, each ``timed`` activity returns the engine's scheduled time of its
``ActivityTaskScheduled`` event (processor clock, whole ms) and its own start and end times, so:

* dispatch = activity started - activity scheduled (task produced in the transaction, consumed
  by the worker, activity invoked);
* step = next activity scheduled - previous activity finished. With eager workflow tasks (the
  worker's default, decision 0031): the worker runs the workflow's next task and sends it with
  the result -> one processor transaction records both and schedules the next activity. Without
  (``KADENCE_WORKER_EAGER=0``): completion command -> processor transaction -> workflow task ->
  worker answers -> processor transaction that schedules the next activity;
* start_to_close = client sends the start -> client receives the result reply.
"""

from __future__ import annotations

import asyncio
import itertools
import time

from kadence import Worker

from .. import workloads
from ..common import QUEUE, Context, CpuMeter, cpu_per_workflow, summary
from ..engine import engine
from ..load import Recorder, closed_loop, open_loop

#: used when the throughput scenario did not run (``--only latency``)
DEFAULT_HALF_RATE = 50.0


def analyse(done, t0: float, t1: float) -> dict:
    dispatch, step, first, e2e = [], [], [], []
    for d in done:
        if not (t0 <= d.started < t1) or not isinstance(d.result, list):
            continue
        e2e.append((d.finished - d.started) * 1000)
        acts = d.result
        first.append(acts[0][1] - d.wall_started_ms)
        for _x, sched, start, _end in acts:
            dispatch.append(start - sched)
        for prev, nxt in itertools.pairwise(acts):
            step.append(nxt[1] - prev[3])
    out = summary(step)
    out.update(
        {
            "what": "activity completed -> next activity scheduled (ms)",
            "dispatch": summary(dispatch),
            "start_to_first_scheduled": summary(first),
            "start_to_close": summary(e2e),
        }
    )
    return out


async def _watch(
    ctx, task, rec: Recorder, runner, w0: float, w1: float, label: str, eng, cpu: CpuMeter | None = None
) -> dict | None:
    """Until ``runner`` is done; with ``cpu``: its usage over [w0, w1) (to the next 0.25 s)."""
    usage, started = None, False
    while not runner.done():
        now = time.monotonic()
        if cpu is not None and not started and now >= w0:
            cpu.start()
            started = True
        if cpu is not None and started and usage is None and now >= w1:
            usage = cpu.stop()
        phase = "warm-up" if now < w0 else ("drain" if now >= w1 else f"{now - w0:.0f}/{w1 - w0:.0f}s")
        ctx.update(
            task, f"{label} {phase}  completed {len(rec.done)}  in flight {rec.inflight}  errors {len(rec.errors)}"
        )
        eng.procs.check_alive()
        await asyncio.wait({runner}, timeout=0.25)
    await runner
    if cpu is not None and started and usage is None:
        usage = cpu.stop()
    return usage


async def _one_at_a_time(ctx: Context, task, eng, wf, label: str, *, eager: bool = False) -> dict:
    """start -> result of ``wf``, one at a time, over half a window, and the CPU per workflow of
    every process (the bench's own included). ``eager``: started with ``request_eager_start``,
    a worker in this process (beside the engine's worker processes) running the first task."""
    s = ctx.settings
    rec = Recorder()
    local = Worker(eng.client, task_queue=QUEUE, workflows=[wf], activities=[workloads.noop]) if eager else None
    if local is not None:
        await local.__aenter__()
        await local.wait_started(60)
    try:
        w0 = time.monotonic() + s.warmup / 2
        w1 = w0 + s.seconds / 2
        cpu = CpuMeter(eng.pids())
        runner = asyncio.create_task(closed_loop(eng.client, wf, rec, concurrency=1, until=w1, eager=eager))
        usage = await _watch(ctx, task, rec, runner, w0, w1, label, eng, cpu)
    finally:
        if local is not None:
            await local.__aexit__(None, None, None)
    e2e = [(d.finished - d.started) * 1000 for d in rec.done if w0 <= d.started < w1]
    out = {"start_to_close": summary(e2e), "errors": len(rec.errors)}
    out["cpu_ms_per_workflow"] = cpu_per_workflow(usage or {}, s.seconds / 2, len(e2e))
    if local is not None:
        out["eager_starts"] = local.stats["eager_starts"]
    return out


async def run(ctx: Context) -> dict:
    s = ctx.settings
    task = ctx.task("latency")
    tp = ctx.results.get("throughput", {}).get("three_activity", {})
    max_rate = tp.get("wf_per_s") if isinstance(tp, dict) else None
    half_rate = round(max_rate / 2, 1) if max_rate else DEFAULT_HALF_RATE
    out: dict = {}
    async with engine(ctx, "latency") as eng:
        # light load: one workflow at a time
        rec = Recorder()
        w0 = time.monotonic() + s.warmup
        w1 = w0 + s.seconds
        cpu = CpuMeter(eng.pids())
        runner = asyncio.create_task(closed_loop(eng.client, workloads.TimedThree, rec, concurrency=1, until=w1))
        usage = await _watch(ctx, task, rec, runner, w0, w1, "light", eng, cpu)
        out["light"] = analyse(rec.done, w0, w1)
        out["light"]["errors"] = len(rec.errors)
        out["light"]["cpu_ms_per_workflow"] = cpu_per_workflow(
            usage or {}, s.seconds, out["light"]["start_to_close"]["samples"]
        )
        # the same, one activity (issue 19: p50 < 5 ms); three local activities (decision 0043)
        out["light_one_activity"] = await _one_at_a_time(ctx, task, eng, workloads.OneActivity, "light 1-activity")
        out["light_three_local"] = await _one_at_a_time(
            ctx, task, eng, workloads.ThreeLocal, "light 3 local activities"
        )
        # eager workflow start (issue 45): the first task run by a worker in the client's process
        # and recorded with the start; back to back with the two above
        out["light_three_local_eager"] = await _one_at_a_time(
            ctx, task, eng, workloads.ThreeLocal, "light 3 local activities, eager start", eager=True
        )
        out["light_three_eager"] = await _one_at_a_time(
            ctx, task, eng, workloads.ThreeActivities, "light 3 activities, eager start", eager=True
        )
        out["light_three"] = await _one_at_a_time(ctx, task, eng, workloads.ThreeActivities, "light 3 activities")
        # half load: open loop at half the measured maximum
        rec = Recorder()
        w0 = time.monotonic() + s.warmup
        w1 = w0 + s.seconds
        cpu = CpuMeter(eng.pids())
        cpu.start()
        runner = asyncio.create_task(
            open_loop(eng.client, workloads.TimedThree, rec, rate=half_rate, until=w1, drain=30)
        )
        await _watch(ctx, task, rec, runner, w0, w1, f"half ({half_rate}/s)", eng)
        usage = cpu.stop()
        out["half_load"] = analyse(rec.done, w0, w1)
        out["half_load"].update(
            {
                "rate_wf_per_s": half_rate,
                "max_rate_source": "throughput.three_activity" if max_rate else "default (throughput not run)",
                "errors": len(rec.errors),
                "error_sample": rec.errors[:3],
                "cpu_percent_of_core": usage,
                "started_in_window": sum(1 for d in rec.done if w0 <= d.started < w1),
            }
        )
    light, half = out["light"], out["half_load"]
    ctx.update(
        task,
        f"[green]light step p50 {light['p50']} p99 {light['p99']} ms; dispatch p50 "
        f"{light['dispatch']['p50']} ms; half-load step p50 {half['p50']} p99 {half['p99']} ms[/]",
    )
    return out
