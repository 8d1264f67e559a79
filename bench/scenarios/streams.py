"""Scenario ``streams`` (issue 47 item 2): how soon a published value reaches Server-Sent Events
readers at light load.

One engine (a processor, a worker subprocess) and a ``kadence gateway`` subprocess. A workflow
(``bench.workloads.Streamer``) runs ``KADENCE_BENCH_STREAM_VALUES`` activities (default 1,000) one
after the other, each publishing one value that carries the wall-clock time of its publish; the
value reaches the stream with the activity's accepted result. Measured at each reader, per
value: *publish to SSE* (receipt minus the publish time: the activity's completion, the
processor's transaction, the gateway's read, the HTTP write) and *accepted to SSE* (receipt
minus the time the processor accepted it: the readers' path alone). Two rounds back to back: one
reader, then ``KADENCE_BENCH_STREAM_READERS`` readers (default 100) of one workflow. The issue's
target: publish to SSE p99 < 50 ms at light load."""

from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import datetime

import httpx

from ..common import QUEUE, Context, CpuMeter, summary
from ..engine import engine, serve_gateway


async def _read(http: httpx.AsyncClient, path: str, out: list[tuple[float, float]], ready: asyncio.Event) -> None:
    """(publish to receipt, accepted to receipt) in ms of each value, until the end event."""
    async with http.stream("GET", path) as response:
        response.raise_for_status()
        ready.set()
        data = None
        async for line in response.aiter_lines():
            now = time.time() * 1000
            if line.startswith("event: end"):
                return
            if line.startswith("data: "):
                data = json.loads(line[6:])
            elif not line and data is not None:
                accepted = datetime.fromisoformat(data["time"]).timestamp() * 1000
                out.append((now - data["value"]["at_ms"], now - accepted))
                data = None


async def _round(eng, http: httpx.AsyncClient, readers: int, values: int, tag: str) -> dict:
    workflow_id = f"stream-{tag}"
    handle = await eng.client.start_workflow("Streamer", values, id=workflow_id, task_queue=QUEUE)
    samples: list[list[tuple[float, float]]] = [[] for _ in range(readers)]
    ready = [asyncio.Event() for _ in range(readers)]
    path = f"/v1/workflows/{workflow_id}/streams/ticks"
    tasks = [asyncio.ensure_future(_read(http, path, samples[i], ready[i])) for i in range(readers)]
    await asyncio.wait_for(asyncio.gather(*(r.wait() for r in ready)), 60)
    cpu = CpuMeter({**eng.pids(), "gateway": eng.procs.procs["gw"].pid})
    cpu.start()
    await handle.result(timeout=300)
    await asyncio.wait_for(asyncio.gather(*tasks), 120)
    usage = cpu.stop()
    publish = [p for s in samples for p, _a in s]
    accepted = [a for s in samples for _p, a in s]
    return {
        "readers": readers,
        "values_each": [len(s) for s in samples][:3],
        "complete": all(len(s) == values for s in samples),
        "publish_to_sse_ms": summary(publish),
        "accepted_to_sse_ms": summary(accepted),
        "cpu_percent": usage,
    }


async def run(ctx: Context) -> dict:
    values = int(os.environ.get("KADENCE_BENCH_STREAM_VALUES", "1000"))
    many = int(os.environ.get("KADENCE_BENCH_STREAM_READERS", "100"))
    task = ctx.task("streams")
    async with engine(ctx, "streams", timers=False, workers=1) as eng:
        url, _port, headers = await serve_gateway(ctx, eng, task)
        limits = httpx.Limits(max_connections=many + 10, max_keepalive_connections=many + 10)
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120, limits=limits) as http:
            ctx.update(task, "one reader")
            one = await _round(eng, http, 1, values, "one")
            ctx.update(task, f"{many} readers")
            fan = await _round(eng, http, many, values, "many")
    p99 = one["publish_to_sse_ms"]["p99"]
    ctx.update(
        task, f"[green]publish to SSE p99 {p99} ms (one reader), {fan['publish_to_sse_ms']['p99']} ms ({many})[/]"
    )
    return {"values": values, "one_reader": one, "many_readers": fan}
