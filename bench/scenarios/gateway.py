"""Scenario: workflow starts through the HTTP gateway, against the same starts sent straight to Kafka.

One engine (fresh namespace, a processor and a worker). A `kadence gateway` subprocess serves it,
with API keys on when ``KADENCE_REDIS_URL`` is set (so each request pays the key check, the token
bucket script and the Idempotency-Key fingerprint; quotas are disabled for the run) and
``--no-auth`` otherwise. A closed loop of ``CONCURRENCY`` requests in flight posts starts
(unique workflow ID and Idempotency-Key each); the direct path is the same closed loop sending
the same start commands with ``EngineClient.send`` and awaiting their replies (what the gateway
does per request, without HTTP).

Both paths first run unmeasured for ``SYSTEM_WARMUP_S`` (a freshly started broker commits
transactions several times slower in its first seconds under load), then in ``ORDER`` (ABBA),
each for half of ``KADENCE_BENCH_SECONDS`` per round after its own warm-up, so load that drifts
during the run weighs on both alike. Results: starts/s and latency of both,
``gateway_to_direct_ratio`` (HTTP starts/s over direct starts/s), per round the processor's
commands/s, commands per transaction and commit time, and CPU use.

The HTTP client is ``bench.http1`` (keep-alive, one request per connection at a time): it shares
the 2 cores with the gateway, and httpx would spend more CPU per request than the gateway does.
``KADENCE_BENCH_GATEWAY_CLIENT=httpx`` measures with httpx instead. ``gateway_cpu_ms_per_start``
(gateway CPU seconds over HTTP starts, in ms) is the number least moved by other load.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import httpx

from kadence.topics import EngineClient, JsonConverter

from ..common import QUEUE, BenchError, Context, CpuMeter, metric_delta, summary
from ..engine import engine, serve_gateway
from ..http1 import Http1Pool

CONCURRENCY = 32
#: closed-loop levels of the latency sweep: the highest HTTP starts/s whose p99 stays under
#: P99_BOUND_MS is reported as ``gateway_starts_per_s_p99_under_50ms``
SWEEP = (1, 2, 4, 8, 16, 32)
P99_BOUND_MS = 50.0
#: the phases, in order: each path twice, for half the window each time
ORDER = ("http", "direct", "direct", "http")
#: unmeasured load through each path before the first window
SYSTEM_WARMUP_S = 15.0


def _start_body(wid: str) -> dict:
    return {"workflow_id": wid, "task_queue": QUEUE, "input": [1]}


def _engine_stats(before: dict, after: dict, elapsed: float) -> dict:
    """The processor's work in the window: commands/s, commands per transaction, commit time."""
    commands = metric_delta(before, after, "kadence_processor_commands_total")
    batches = metric_delta(before, after, "kadence_processor_batch_size_count")
    commit_s = metric_delta(before, after, "kadence_processor_commit_seconds_sum")
    return {
        "commands_per_s": round(commands / elapsed, 1),
        "mean_batch": round(commands / batches, 1) if batches else None,
        "mean_commit_ms": round(1000 * commit_s / batches, 2) if batches else None,
    }


async def _closed_loop(
    send, seconds: float, warmup: float, concurrency: int, metrics=None
) -> tuple[list[float], int, float, dict | None]:
    """Run ``send(i)`` from ``concurrency`` loops; latencies (ms) and errors of the calls that
    started inside the measured window, its length, and the processor's stats in the window
    (``metrics()``: a scrape of the processor's counters)."""
    counter = iter(range(10**9))
    lat: list[float] = []
    errors = 0
    t_measure = time.monotonic() + warmup
    t_end = t_measure + seconds
    loop_ = asyncio.get_running_loop()

    async def sample():
        await asyncio.sleep(max(0.0, t_measure - time.monotonic()))
        m0, w0 = await loop_.run_in_executor(None, metrics), time.monotonic()
        await asyncio.sleep(max(0.0, t_end - time.monotonic()))
        m1, w1 = await loop_.run_in_executor(None, metrics), time.monotonic()
        return _engine_stats(m0, m1, w1 - w0)

    sampler = asyncio.ensure_future(sample()) if metrics is not None else None

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
    stats = await sampler if sampler is not None else None
    return lat, errors, seconds, stats


async def run(ctx: Context) -> dict:
    s = ctx.settings
    task = ctx.task("gateway")
    client_kind = os.environ.get("KADENCE_BENCH_GATEWAY_CLIENT") or "http1"
    if client_kind not in ("http1", "httpx"):
        raise BenchError(f"KADENCE_BENCH_GATEWAY_CLIENT must be http1 or httpx, got {client_kind!r}")
    async with engine(ctx, "gateway", timers=False) as eng:
        url, port, headers = await serve_gateway(ctx, eng, task)
        async with httpx.AsyncClient(
            base_url=url, timeout=30, headers=headers, limits=httpx.Limits(max_connections=CONCURRENCY)
        ) as http:
            tag = uuid.uuid4().hex[:6]
            lean = Http1Pool("127.0.0.1", port, headers)

            async def via_http(i: int) -> bool:
                wid = f"gw-{tag}-{i}"
                try:
                    if client_kind == "httpx":
                        r = await http.post(
                            "/v1/workflows/OneActivity/start", json=_start_body(wid), headers={"Idempotency-Key": wid}
                        )
                    else:
                        r = await lean.post_json(
                            "/v1/workflows/OneActivity/start", _start_body(wid), {"Idempotency-Key": wid}
                        )
                    return r.status_code == 201
                except (httpx.HTTPError, OSError, asyncio.IncompleteReadError, ValueError):
                    return False

            direct: EngineClient = await asyncio.get_running_loop().run_in_executor(None, EngineClient, eng.config)
            body = JsonConverter().to_bytes([1])

            async def via_kafka(i: int) -> bool:
                wid = f"direct-{tag}-{i}"
                fut = direct.send(
                    wid,
                    "StartWorkflow",
                    {
                        "workflow_type": "OneActivity",
                        "task_queue": QUEUE,
                        "input": body,
                        "id_reuse_policy": "allow_duplicate",
                        "run_timeout_ms": None,
                        "search_attributes": {},
                    },
                    request_id=wid,
                )
                try:
                    reply = await asyncio.wait_for(asyncio.wrap_future(fut), 30)
                    return reply["status"] == "ok"
                except (TimeoutError, Exception):  # noqa: BLE001 - counted as an error
                    return False

            paths = {"http": via_http, "direct": via_kafka}
            out = {p: {"lat": [], "errors": 0, "window": 0.0, "rounds": []} for p in paths}
            half = s.seconds / 2
            try:
                # a fresh broker (a young JVM) commits transactions several times slower in its
                # first seconds under load: warm both paths up, unmeasured, before the windows
                for path in ORDER[:2]:
                    ctx.update(task, f"warming up ({path})")
                    await _closed_loop(paths[path], 0, max(SYSTEM_WARMUP_S, s.warmup), CONCURRENCY)
                # ABBA: each path gets two half windows, so load that drifts during the run (other
                # processes, the broker settling after topic creation) weighs on both alike
                for n, path in enumerate(ORDER):
                    ctx.update(task, f"{path} starts x{CONCURRENCY} ({n + 1}/{len(ORDER)}), {half:g}s")
                    cpu = CpuMeter({**eng.pids(), "gateway": eng.procs.procs["gw"].pid})
                    cpu.start()
                    lat, err, window, stats = await _closed_loop(
                        paths[path], half, s.warmup, CONCURRENCY, eng.procs.metrics
                    )
                    usage = cpu.stop()
                    o = out[path]
                    o["lat"] += lat
                    o["errors"] += err
                    o["window"] += window
                    o["rounds"].append(
                        {"starts_per_s": round(len(lat) / window, 1), "engine": stats, "cpu_percent": usage}
                    )
                # the latency sweep: HTTP starts/s at rising concurrency, with p99 at each level
                sweep = []
                for level in SWEEP:
                    ctx.update(task, f"http sweep x{level}")
                    lat, err, window, _stats = await _closed_loop(paths["http"], max(2.0, half / 2), 1.0, level)
                    if lat:
                        sweep.append(
                            {
                                "concurrency": level,
                                "starts_per_s": round(len(lat) / window, 1),
                                "p50_ms": summary(lat)["p50"],
                                "p99_ms": summary(lat)["p99"],
                                "errors": err,
                            }
                        )
            finally:
                await lean.aclose()
                await asyncio.get_running_loop().run_in_executor(None, direct.close)

    http_lat, direct_lat = out["http"]["lat"], out["direct"]["lat"]
    http_rate = len(http_lat) / out["http"]["window"]
    direct_rate = len(direct_lat) / out["direct"]["window"]
    if not http_lat:
        raise BenchError(f"no HTTP start succeeded ({out['http']['errors']} errors)")
    gw_cpu = [r["cpu_percent"]["gateway"] for r in out["http"]["rounds"]]
    under = [lvl["starts_per_s"] for lvl in sweep if lvl["p99_ms"] < P99_BOUND_MS]
    return {
        "gateway_starts_per_s_p99_under_50ms": max(under) if under else None,
        "gateway_latency_sweep": sweep,
        "gateway_starts_per_s": round(http_rate, 1),
        "gateway_start_p99_ms": summary(http_lat)["p99"],
        "gateway_to_direct_ratio": round(http_rate / direct_rate, 3) if direct_rate else None,
        "gateway_start_ms": summary(http_lat),
        "gateway_errors": out["http"]["errors"],
        "direct_starts_per_s": round(direct_rate, 1),
        "direct_start_ms": summary(direct_lat),
        "direct_errors": out["direct"]["errors"],
        "concurrency": CONCURRENCY,
        "auth": "Authorization" in headers,
        "http_client": client_kind,
        "order": list(ORDER),
        "gateway_cpu_ms_per_start": round(10 * (sum(gw_cpu) / len(gw_cpu)) / http_rate, 2) if http_rate else None,
        "http_rounds": out["http"]["rounds"],
        "direct_rounds": out["direct"]["rounds"],
    }
