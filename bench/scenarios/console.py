"""Scenario: the web console's pages (issue 17: the list page and a workflow page served with
p99 < 100 ms, with 100,000 runs in visibility and a 5,000-event history).

One engine (a processor and a worker). The visibility projection of its namespace gets
``KADENCE_BENCH_CONSOLE_RUNS`` (default 100,000) runs written through the projection's own Lua
script (the write path ``kadence projections run`` uses, without replaying 100,000 workflows),
and one real run of ``LongHistory`` leaves a history of ``KADENCE_BENCH_CONSOLE_EVENTS``
(default 5,000) events. A ``kadence gateway --no-auth`` subprocess serves the console; one
client requests, one at a time for ``KADENCE_BENCH_CONSOLE_SECONDS`` (default 20) each: the
list page (first page and counts), the list filtered by type and status, and the long run's page
(describe, the whole history read from Kafka, the grouped timeline, rendered). Latency p50/p99
per page, and the gateway's CPU per request."""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time

import httpx

from kadence.connectors.visibility_sink import VISIBILITY_LUA
from kadence.readmodels.keys import ProjectionKeys

from ..common import BenchError, Context, CpuMeter, free_port, summary
from ..engine import engine

PAGES = {"list": "/ui/workflows", "list_filtered": "/ui/workflows?type=Bench3&status=completed"}


async def _fill_visibility(redis_url: str, namespace: str, runs: int, progress) -> None:
    """``runs`` runs (start, and a close for two in three) through the visibility script."""
    import redis.asyncio as aioredis

    r = aioredis.from_url(redis_url)
    try:
        script = r.register_script(VISIBILITY_LUA)
        base = ProjectionKeys(namespace, "visibility").base
        rng = random.Random(17)
        t0 = int(time.time() * 1000) - runs * 1000
        batch: list[str] = []
        for i in range(runs):
            wf, run = f"bench-run-{i}", f"r{i}"
            start = t0 + i * 1000
            batch.append(
                json.dumps(
                    {
                        "k": "start",
                        "w": wf,
                        "r": run,
                        "s": 1,
                        "p": i % 4,
                        "o": i,
                        "t": start,
                        "type": f"Bench{i % 5}",
                        "tq": "bench",
                        "sa": {"tier": rng.choice("abc")},
                        "parent": "",
                        "cont": "",
                    }
                )
            )
            if i % 3:
                batch.append(
                    json.dumps(
                        {
                            "k": "close",
                            "w": wf,
                            "r": run,
                            "s": 2,
                            "p": i % 4,
                            "o": i,
                            "t": start + 500,
                            "status": "completed",
                            "new_run": "",
                        }
                    )
                )
            if len(batch) >= 2000:
                await script(keys=[], args=[base, "live", *batch])
                batch = []
                progress(i + 1)
        if batch:
            await script(keys=[], args=[base, "live", *batch])
    finally:
        await r.aclose()


async def _measure(http: httpx.AsyncClient, path: str, seconds: float) -> list[float]:
    times: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        t = time.perf_counter()
        resp = await http.get(path)
        times.append((time.perf_counter() - t) * 1000)
        if resp.status_code != 200:
            raise BenchError(f"GET {path}: {resp.status_code} {resp.text[:300]}")
    return times


async def run(ctx: Context) -> dict:
    redis_url = os.environ.get("KADENCE_REDIS_URL")
    if not redis_url:
        raise BenchError("the console scenario needs KADENCE_REDIS_URL (the visibility projection)")
    runs = int(os.environ.get("KADENCE_BENCH_CONSOLE_RUNS", "100000"))
    events = int(os.environ.get("KADENCE_BENCH_CONSOLE_EVENTS", "5000"))
    seconds = float(os.environ.get("KADENCE_BENCH_CONSOLE_SECONDS", "20"))
    task = ctx.task("console")
    async with engine(ctx, "console", timers=False) as eng:
        ctx.update(task, f"writing {runs} runs into visibility")
        await _fill_visibility(
            redis_url, eng.config.namespace, runs, lambda n: ctx.update(task, f"visibility: {n}/{runs} runs")
        )
        ctx.update(task, f"running a workflow to a {events}-event history")
        long_id = "console-long-history"
        handle = await eng.client.start_workflow(
            "LongHistory", max(1, (events - 5) // 4), id=long_id, task_queue="bench"
        )
        await handle.result(timeout=600)
        history_len = len(await handle.history(raw=True))
        port = free_port()
        eng.procs._spawn(
            "gw",
            [sys.executable, "-m", "kadence.cli", "gateway", "--port", str(port), "--no-auth"],
            eng.procs._env(KADENCE_REDIS_URL=redis_url),
        )
        url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            deadline = time.monotonic() + 60
            while True:
                eng.procs.check_alive()
                try:
                    if (await http.get("/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise BenchError(f"the gateway did not get ready; log: {eng.procs.logs['gw']}")
                await asyncio.sleep(0.2)
            # the floor under the workflow page: describe, a command answered by the processor
            pages = {**PAGES, "workflow": f"/ui/workflows/{long_id}", "describe_api": f"/v1/workflows/{long_id}"}
            first = await http.get(pages["list"])
            if "100000 runs" not in first.text.replace(",", "") and runs == 100000:
                raise BenchError("the list page does not count the 100,000 runs written")
            out: dict = {"runs_in_visibility": runs, "history_events": history_len, "window_s": seconds}
            for name, path in pages.items():
                ctx.update(task, f"measuring {name}")
                for _ in range(5):  # warm: templates compiled, connections open
                    await http.get(path)
                meter = CpuMeter({"gateway": eng.procs.procs["gw"].pid})
                meter.start()
                times = await _measure(http, path, seconds)
                cpu = meter.stop()
                out[name] = {
                    "ms": summary(times),
                    "requests": len(times),
                    "gateway_cpu_ms_per_request": round(cpu["gateway"] * seconds * 10 / len(times), 2),
                }
        verdict = ", ".join(f"{n} p99 {out[n]['ms']['p99']} ms" for n in pages)
        ok = all(out[n]["ms"]["p99"] < 100 for n in ("list", "list_filtered", "workflow"))
        out["target_p99_under_100_ms"] = ok
        ctx.update(task, f"[{'green' if ok else 'red'}]{verdict}[/]")
        return out
