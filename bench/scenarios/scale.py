"""Scenario 5: processor memory per idle open workflow, and shard restore speed.

Opens N workflows that each start a one-hour durable timer and wait (``IdleSleeper``); the
processor's RSS (psutil) before and after, divided by N, is the memory per idle open workflow.
Then the processor is stopped (SIGTERM) and a new one with the same instance ID is started;
its log lines ``restored partition P: W workflows (O open) in X s`` give the restore speed."""

from __future__ import annotations

import asyncio
import re
import signal
import time

import psutil

from .. import workloads
from ..common import Context, metric_delta, metric_sum
from ..engine import engine

WARM = 500
CONCURRENCY = 400
RESTORED = re.compile(r"restored partition (\d+): (\d+) workflows \((\d+) open\) in ([\d.]+)s")


async def _open_idle(eng, n: int, prefix: str, progress) -> int:
    sem = asyncio.Semaphore(CONCURRENCY)
    ok = 0

    async def one(i: int) -> None:
        nonlocal ok
        async with sem:
            try:
                await eng.client.start_workflow(
                    workloads.IdleSleeper, 1.0, id=f"{prefix}-{i}", task_queue="bench", timeout=120
                )
                ok += 1
            except Exception:  # noqa: BLE001 - counted by the caller
                pass
            if i % 500 == 0:
                progress(ok)

    await asyncio.gather(*(one(i) for i in range(n)))
    return ok


async def _settle(eng, quiet_s: float = 3.0, timeout: float = 300.0) -> None:
    """Until the processor's command counter has not moved for ``quiet_s`` (workflow tasks done)."""
    last, since = None, time.monotonic()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = metric_sum(eng.procs.metrics(), "kadence_processor_commands_total")
        if value != last:
            last, since = value, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        await asyncio.sleep(0.25)


def _rss(pid: int) -> int:
    return psutil.Process(pid).memory_info().rss


async def run(ctx: Context) -> dict:
    s = ctx.settings
    n = s.idle_workflows
    task = ctx.task("scale")
    out: dict = {"idle_workflows": n}
    async with engine(ctx, "scale", timers=False) as eng:
        pid = eng.procs.procs["p0"].pid
        ctx.update(task, f"warm-up: {WARM} idle workflows")
        await _open_idle(eng, WARM, "warm", lambda k: None)
        await _settle(eng)
        rss0 = _rss(pid)
        m0 = eng.procs.metrics()
        t0 = time.monotonic()
        ok = await _open_idle(eng, n, "idle", lambda k: ctx.update(task, f"opening idle workflows: {k}/{n}"))
        ctx.update(task, f"{ok} started; waiting for their workflow tasks")
        await _settle(eng)
        open_s = time.monotonic() - t0
        m1 = eng.procs.metrics()
        rss1 = _rss(pid)
        out.update(
            {
                "started": ok,
                "rss_before_bytes": rss0,
                "rss_after_bytes": rss1,
                "bytes_per_idle_workflow": round((rss1 - rss0) / max(1, ok)),
                "commands": metric_delta(m0, m1, "kadence_processor_commands_total"),
                "open_seconds": round(open_s, 1),
                "opened_wf_per_s": round(ok / open_s, 1),
            }
        )
        ctx.update(task, f"{out['bytes_per_idle_workflow']} B per idle workflow; restarting the processor")
        # restore: a new instance with the same ID rebuilds every shard from state + history
        await asyncio.get_running_loop().run_in_executor(None, eng.procs.signal, "p0", signal.SIGTERM)
        t_spawn = time.monotonic()
        eng.procs.start_processor("p0")
        matches = await eng.procs.wait_log("p0", RESTORED.pattern, 300, count=s.partitions)
        await eng.procs.wait_log("p0", r"assigned partitions", 60)
        t_ready = time.monotonic()
        workflows = sum(int(m.group(2)) for m in matches)
        open_runs = sum(int(m.group(3)) for m in matches)
        seconds = sum(float(m.group(4)) for m in matches)
        rss_restored = _rss(eng.procs.procs["p0"].pid)
        out.update(
            {
                "restore": {
                    "workflows": workflows,
                    "open": open_runs,
                    "seconds_in_restore": round(seconds, 2),
                    "per_partition": [
                        {"partition": int(m.group(1)), "workflows": int(m.group(2)), "seconds": float(m.group(4))}
                        for m in matches
                    ],
                    "spawn_to_assigned_s": round(t_ready - t_spawn, 2),
                    "rss_after_restore_bytes": rss_restored,
                },
                "restore_wf_per_s": round(workflows / seconds, 1) if seconds > 0 else None,
            }
        )
    ctx.update(
        task,
        f"[green]{out['bytes_per_idle_workflow']} B per idle workflow; restore "
        f"{out['restore_wf_per_s']} wf/s ({workflows} in {seconds:.2f} s)[/]",
    )
    return out
