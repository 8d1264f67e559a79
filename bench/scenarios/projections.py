"""Scenario 7: the Redis projections.

A projection process (`kadence projections run`) follows the history topic while a closed loop
of one-activity workflows runs for ``KADENCE_BENCH_SECONDS``; its lag (events, seconds) is
sampled from its Prometheus metrics every 0.25 s: ``projection_lag_steady`` (p50/p99/max).
Then the projections are rebuilt from offset 0 (in this process, as `kadence projections
rebuild` does): ``projection_rebuild_events_per_s``."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import redis.asyncio as aioredis

from kadence.connectors.rebuild import rebuild_projections

from .. import workloads
from ..common import BenchError, Context, free_port, scrape, summary
from ..engine import engine
from ..load import Recorder, closed_loop

CONCURRENCY = 32


async def run(ctx: Context) -> dict:
    s = ctx.settings
    url = os.environ.get("KADENCE_REDIS_URL")
    if not url:
        raise BenchError("KADENCE_REDIS_URL is not set (run through scripts/devstack.py / make bench)")
    task = ctx.task("projections")
    async with engine(ctx, "projections") as eng:
        port = free_port()
        eng.procs._spawn(
            "proj",
            [sys.executable, "-m", "kadence.cli", "projections", "run", "--metrics-port", str(port)],
            eng.procs._env(KADENCE_REDIS_URL=url, KADENCE_PROJECTION_ID="b0"),
        )
        redis = aioredis.from_url(url)
        try:
            ctx.update(task, "waiting for the projection process")
            deadline = time.monotonic() + 90
            while True:
                eng.procs.check_alive()
                try:
                    if "kadence_projection_lag_events" in " ".join(scrape(port)):
                        break
                except Exception:  # noqa: BLE001 - not listening yet
                    pass
                if time.monotonic() > deadline:
                    raise BenchError("projection process reported no lag within 90 s")
                await asyncio.sleep(0.25)
            ctx.update(task, f"load for {s.seconds:g}s, sampling lag")
            rec = Recorder()
            until = time.monotonic() + s.warmup + s.seconds
            load = asyncio.create_task(
                closed_loop(eng.client, workloads.OneActivity, rec, concurrency=CONCURRENCY, until=until)
            )
            await asyncio.sleep(s.warmup)
            events, seconds = [], []
            while not load.done():
                m = scrape(port)
                ev = [v for k, v in m.items() if k.startswith("kadence_projection_lag_events")]
                sec = [v for k, v in m.items() if k.startswith("kadence_projection_lag_seconds")]
                if ev and sec:
                    events.append(max(ev))
                    seconds.append(max(sec))
                await asyncio.sleep(0.25)
            await load
            ctx.update(task, "rebuilding from offset 0")
            report = await rebuild_projections(eng.config, redis, grace_s=0.2)
        finally:
            await redis.aclose()
    if not events:
        raise BenchError("no lag samples")
    return {
        "workflows_completed": len(rec.done),
        "projection_lag_steady": {"events": summary(events), "seconds": summary(seconds, 3), "samples": len(events)},
        "projection_rebuild_events_per_s": round(report.events_per_s, 1),
        "rebuild_events": report.events,
        "rebuild_seconds": round(report.seconds, 2),
    }
