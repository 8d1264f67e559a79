"""Scenario ``peers``: Kadence beside DBOS on PostgreSQL, one workflow at a time, back to back in
one run (issue 45's targets). The same work on each side: a workflow of three steps that each
return their input plus one, started and awaited by one client process that also runs the steps.
Kadence: three local activities started with ``request_eager_start`` (a worker in the client's
process), the engine's processor, timer service and worker processes and the broker beside it.
DBOS 3.4: three ``@DBOS.step``s in a ``@DBOS.workflow``, PostgreSQL beside it (``bench.peers``).

The two alternate, ``KADENCE_BENCH_PEER_ROUNDS`` (default 2) rounds of half a window each, so
that a slow moment of the machine falls on both. CPU per workflow counts every process of a side,
the client's included (for Kadence that is where the eager first task and the local activities
run)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time

from kadence import Worker

from .. import workloads
from ..common import QUEUE, Context, CpuMeter, free_port, summary
from ..engine import engine
from ..load import Recorder, closed_loop
from ..peers.setup import peer_python, postgres, postgres_pids

DBOS_SCRIPT = os.path.join(os.path.dirname(__file__), "..", "peers", "dbos_three_steps.py")


def _cpu_ms(usage: dict, seconds: float, workflows: int) -> dict:
    per = {k: round(v / 100 * seconds * 1000 / workflows, 2) for k, v in usage.items() if k != "machine_busy"}
    per["all"] = round(sum(per.values()), 2)
    return per


async def _kadence_round(ctx: Context, task, eng, seconds: float, warmup: float) -> dict:
    rec = Recorder()
    async with Worker(eng.client, task_queue=QUEUE, workflows=[workloads.ThreeLocal], activities=[workloads.noop]) as w:
        await w.wait_started(60)
        w0 = time.monotonic() + warmup
        w1 = w0 + seconds
        cpu = CpuMeter(eng.pids())
        runner = asyncio.create_task(
            closed_loop(eng.client, workloads.ThreeLocal, rec, concurrency=1, until=w1, eager=True)
        )
        usage, started = None, False
        while not runner.done():
            now = time.monotonic()
            if not started and now >= w0:
                cpu.start()
                started = True
            if started and usage is None and now >= w1:
                usage = cpu.stop()
            ctx.update(task, f"Kadence: completed {len(rec.done)}")
            await asyncio.wait({runner}, timeout=0.1)
        await runner
        if usage is None:
            usage = cpu.stop()
    e2e = [(d.finished - d.started) * 1000 for d in rec.done if w0 <= d.started < w1]
    return {"latencies_ms": e2e, "errors": len(rec.errors), "cpu": _cpu_ms(usage, seconds, max(1, len(e2e)))}


def _dbos_round(python: str, url: str, port: int, seconds: float, warmup: float) -> dict:
    proc = subprocess.Popen(
        [python, DBOS_SCRIPT, "--database-url", url, "--seconds", str(seconds), "--warmup", str(warmup)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    ready = json.loads(proc.stdout.readline() or "{}")
    if not ready.get("ready"):
        proc.kill()
        raise RuntimeError(f"the DBOS script did not start (exit {proc.wait()})")
    time.sleep(warmup)  # its connections are open by the end of its warm-up
    procs = {"dbos": proc.pid, **{f"postgres-{pid}": pid for pid in postgres_pids(port)}}
    cpu = CpuMeter(procs)
    cpu.start()
    out = json.loads(proc.stdout.readline())
    usage = cpu.stop()
    proc.wait(30)
    usage = {
        "dbos": usage.pop("dbos"),
        "postgres": round(sum(v for k, v in usage.items() if k.startswith("postgres-")), 1),
    }
    return {
        "latencies_ms": out["latencies_ms"],
        "errors": 0,
        "cpu": _cpu_ms(usage, seconds, max(1, len(out["latencies_ms"]))),
    }


def _merge(rounds: list[dict]) -> dict:
    lat = [x for r in rounds for x in r["latencies_ms"]]
    keys = sorted({k for r in rounds for k in r["cpu"]})
    return {
        "start_to_close": summary(lat),
        "errors": sum(r["errors"] for r in rounds),
        "cpu_ms_per_workflow_by_round": [r["cpu"] for r in rounds],
        "cpu_ms_per_workflow": {k: round(sum(r["cpu"].get(k, 0) for r in rounds) / len(rounds), 2) for k in keys},
    }


async def run(ctx: Context) -> dict:
    s = ctx.settings
    task = ctx.task("peers")
    rounds = int(os.environ.get("KADENCE_BENCH_PEER_ROUNDS", "2"))
    seconds = s.seconds / 2
    loop = asyncio.get_running_loop()
    ctx.update(task, "setting up DBOS and PostgreSQL")
    python = str(await loop.run_in_executor(None, peer_python))
    port = free_port()
    kadence_rounds, dbos_rounds = [], []
    with postgres(port) as url:
        async with engine(ctx, "peers") as eng:
            for i in range(rounds):
                ctx.update(task, f"round {i + 1}/{rounds}: Kadence")
                kadence_rounds.append(await _kadence_round(ctx, task, eng, seconds, s.warmup / 2))
                ctx.update(task, f"round {i + 1}/{rounds}: DBOS")
                dbos_rounds.append(
                    await loop.run_in_executor(None, _dbos_round, python, url, port, seconds, s.warmup / 2)
                )
    kadence, dbos = _merge(kadence_rounds), _merge(dbos_rounds)
    out = {
        "what": "3 steps, one workflow at a time: Kadence 3 local activities with an eager start; DBOS 3 steps",
        "kadence": kadence,
        "dbos": dbos,
    }
    kp, dp = kadence["start_to_close"].get("p50"), dbos["start_to_close"].get("p50")
    if kp and dp:
        out["p50_ratio_dbos_over_kadence"] = round(dp / kp, 2)
    kc, dc = kadence["cpu_ms_per_workflow"].get("all"), dbos["cpu_ms_per_workflow"].get("all")
    if kc and dc:
        out["cpu_ratio_dbos_over_kadence"] = round(dc / kc, 2)
    return out
