"""Scenario: workflow starts through the HTTP gateway, against the same starts sent straight to Kafka.

One engine (fresh namespace, a processor and a worker). A `kadence gateway` subprocess serves it,
with API keys on when ``KADENCE_REDIS_URL`` is set (so each request pays the key check, the token
bucket script and the Idempotency-Key fingerprint; quotas are disabled for the run) and
``--no-auth`` otherwise. A closed loop of ``CONCURRENCY`` requests in flight posts starts
(unique workflow ID and Idempotency-Key each) for ``KADENCE_BENCH_SECONDS`` after the warm-up;
then the same closed loop sends the same start commands with ``EngineClient.send`` and awaits
their replies (what the gateway does per request, without HTTP). Results: starts/s and latency
of both, and ``gateway_to_direct_ratio`` (HTTP starts/s over direct starts/s).

The HTTP client is ``bench.http1`` (keep-alive, one request per connection at a time): it shares
the 2 cores with the gateway, and httpx would spend more CPU per request than the gateway does.
``KADENCE_BENCH_GATEWAY_CLIENT=httpx`` measures with httpx instead. ``gateway_cpu_ms_per_start``
(gateway CPU seconds over HTTP starts, in ms) is the number least moved by other load.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid

import httpx

from kadence.topics import EngineClient

from ..common import QUEUE, BenchError, Context, CpuMeter, free_port, summary
from ..engine import engine
from ..http1 import Http1Pool

CONCURRENCY = 32


def _start_body(wid: str) -> dict:
    return {"workflow_id": wid, "task_queue": QUEUE, "input": [1]}


async def _closed_loop(send, seconds: float, warmup: float, concurrency: int) -> tuple[list[float], int, float]:
    """Run ``send(i)`` from ``concurrency`` loops; latencies (ms) and errors of the calls that
    started inside the measured window, and its length."""
    counter = iter(range(10**9))
    lat: list[float] = []
    errors = 0
    t_measure = time.monotonic() + warmup
    t_end = t_measure + seconds

    async def loop():
        nonlocal errors
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            ok = await send(next(counter))
            if t0 >= t_measure:
                if ok:
                    lat.append((time.monotonic() - t0) * 1000)
                else:
                    errors += 1

    await asyncio.gather(*(loop() for _ in range(concurrency)))
    return lat, errors, seconds


async def run(ctx: Context) -> dict:
    s = ctx.settings
    task = ctx.task("gateway")
    client_kind = os.environ.get("KADENCE_BENCH_GATEWAY_CLIENT") or "http1"
    if client_kind not in ("http1", "httpx"):
        raise BenchError(f"KADENCE_BENCH_GATEWAY_CLIENT must be http1 or httpx, got {client_kind!r}")
    async with engine(ctx, "gateway", timers=False) as eng:
        redis_url = os.environ.get("KADENCE_REDIS_URL")
        port = free_port()
        env = {"KADENCE_GATEWAY_NS_LIMIT": "0", "KADENCE_GATEWAY_KEY_LIMIT": "0"}
        headers = {}
        if redis_url:
            import redis.asyncio as aioredis

            from kadence.gateway import ApiKeyStore

            r = aioredis.from_url(redis_url)
            try:
                _record, key = await ApiKeyStore(r).create(eng.config.namespace, "bench")
            finally:
                await r.aclose()
            headers["Authorization"] = f"Bearer {key}"
            argv = ["gateway", "--port", str(port)]
        else:
            argv = ["gateway", "--port", str(port), "--no-auth"]
        eng.procs._spawn("gw", [sys.executable, "-m", "kadence.cli", *argv], eng.procs._env(**env))
        url = f"http://127.0.0.1:{port}"
        ctx.update(task, "waiting for the gateway")
        deadline = time.monotonic() + 60
        async with httpx.AsyncClient(base_url=url, timeout=30, headers=headers,
                                     limits=httpx.Limits(max_connections=CONCURRENCY)) as http:
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
            tag = uuid.uuid4().hex[:6]
            lean = Http1Pool("127.0.0.1", port, headers)

            async def via_http(i: int) -> bool:
                wid = f"gw-{tag}-{i}"
                try:
                    if client_kind == "httpx":
                        r = await http.post("/v1/workflows/OneActivity/start", json=_start_body(wid),
                                            headers={"Idempotency-Key": wid})
                    else:
                        r = await lean.post_json("/v1/workflows/OneActivity/start", _start_body(wid),
                                                 {"Idempotency-Key": wid})
                    return r.status_code == 201
                except (httpx.HTTPError, OSError, asyncio.IncompleteReadError, ValueError):
                    return False

            ctx.update(task, f"HTTP starts x{CONCURRENCY} ({client_kind}), {s.seconds:g}s")
            cpu = CpuMeter({**eng.pids(), "gateway": eng.procs.procs["gw"].pid})
            cpu.start()
            try:
                http_lat, http_err, window = await _closed_loop(via_http, s.seconds, s.warmup, CONCURRENCY)
            finally:
                await lean.aclose()
            http_cpu = cpu.stop()

        direct: EngineClient = await asyncio.get_running_loop().run_in_executor(None, EngineClient, eng.config)
        try:
            from kadence.topics import JsonConverter

            body = JsonConverter().to_bytes([1])

            async def via_kafka(i: int) -> bool:
                wid = f"direct-{tag}-{i}"
                fut = direct.send(wid, "StartWorkflow", {
                    "workflow_type": "OneActivity", "task_queue": QUEUE, "input": body,
                    "id_reuse_policy": "allow_duplicate", "run_timeout_ms": None, "search_attributes": {}},
                    request_id=wid)
                try:
                    reply = await asyncio.wait_for(asyncio.wrap_future(fut), 30)
                    return reply["status"] == "ok"
                except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - counted as an error
                    return False

            ctx.update(task, f"direct starts x{CONCURRENCY}, {s.seconds:g}s")
            cpu = CpuMeter(eng.pids())
            cpu.start()
            direct_lat, direct_err, _ = await _closed_loop(via_kafka, s.seconds, s.warmup, CONCURRENCY)
            direct_cpu = cpu.stop()
        finally:
            await asyncio.get_running_loop().run_in_executor(None, direct.close)

    http_rate = len(http_lat) / window
    direct_rate = len(direct_lat) / window
    if not http_lat:
        raise BenchError(f"no HTTP start succeeded ({http_err} errors)")
    return {
        "gateway_starts_per_s": round(http_rate, 1),
        "gateway_start_p99_ms": summary(http_lat)["p99"],
        "gateway_to_direct_ratio": round(http_rate / direct_rate, 3) if direct_rate else None,
        "gateway_start_ms": summary(http_lat), "gateway_errors": http_err,
        "direct_starts_per_s": round(direct_rate, 1), "direct_start_ms": summary(direct_lat),
        "direct_errors": direct_err, "concurrency": CONCURRENCY, "auth": bool(redis_url),
        "http_client": client_kind, "cpu_percent": http_cpu, "direct_cpu_percent": direct_cpu,
        "gateway_cpu_ms_per_start": round(10 * http_cpu["gateway"] / http_rate, 2) if http_rate else None,
    }
