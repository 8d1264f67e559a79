"""Scenario: the ``kadence`` command line's time per call, over Kafka and over the HTTP gateway
(issue 48 item 4: "under 200 ms per call end to end").

One engine (fresh namespace, a processor and a worker) and a ``kadence gateway`` subprocess
(``bench.engine.serve_gateway``: API keys on when Redis is there). One ``SignalSink`` workflow
is started; then ``signal``, ``query`` and ``describe`` each run ``KADENCE_BENCH_CLI_CALLS``
times (default 8) as a fresh process (``python -m kadence.cli``), alternating Kafka and gateway
call by call so that drifting load weighs on both. The time is the whole process, start to exit,
what a user or a script waits. Results per command and path: median and slowest, and the
gateway / Kafka ratio of the medians.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time

from kadence import Client

from ..common import BenchError, Context
from ..engine import engine, serve_gateway

COMMANDS = {
    "signal": ["signal", "cli-bench", "hit", "--input", "[1]"],
    "query": ["query", "cli-bench", "count"],
    "describe": ["describe", "cli-bench"],
}


async def _call(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kadence.cli",
        *argv,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _out, err = await proc.communicate()
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise BenchError(f"kadence {' '.join(argv)} exited {proc.returncode}: {err.decode()[-500:]}")
    return elapsed


async def run(ctx: Context) -> dict:
    calls = int(os.environ.get("KADENCE_BENCH_CLI_CALLS") or 8)
    task = ctx.task("cli")
    async with engine(ctx, "cli", timers=False) as eng:
        url, _port, headers = await serve_gateway(ctx, eng, task)
        client = await Client.connect(config=eng.config)
        try:
            await client.start_workflow("SignalSink", id="cli-bench", task_queue="bench")
        finally:
            await client.close()
        base = {k: v for k, v in os.environ.items() if not k.startswith(("KADENCE_GATEWAY_URL", "KADENCE_API_KEY"))}
        kafka_env = {**base, "KADENCE_KAFKA_BOOTSTRAP": eng.config.bootstrap, "KADENCE_NAMESPACE": eng.config.namespace}
        http_env = {**base, "KADENCE_GATEWAY_URL": url, "KADENCE_KAFKA_BOOTSTRAP": "127.0.0.1:9"}
        if "Authorization" in headers:
            http_env["KADENCE_API_KEY"] = headers["Authorization"].removeprefix("Bearer ")
        times: dict[str, dict[str, list[float]]] = {c: {"kafka": [], "gateway": []} for c in COMMANDS}
        # one unmeasured call each: the first start of an interpreter reads its files from disk
        for argv in COMMANDS.values():
            await _call(argv, kafka_env)
            await _call(argv, http_env)
        for i in range(calls):
            ctx.update(task, f"call {i + 1}/{calls}")
            for name, argv in COMMANDS.items():
                order = (("kafka", kafka_env), ("gateway", http_env))
                for path, env in order if i % 2 == 0 else order[::-1]:
                    times[name][path].append(await _call(argv, env))
    out: dict = {"calls": calls, "auth": "Authorization" in headers}
    for name, paths in times.items():
        for path, values in paths.items():
            out[f"{name}_{path}_median_ms"] = round(statistics.median(values) * 1000, 1)
            out[f"{name}_{path}_max_ms"] = round(max(values) * 1000, 1)
        out[f"{name}_gateway_to_kafka"] = round(
            statistics.median(paths["gateway"]) / statistics.median(paths["kafka"]), 3
        )
    ctx.update(
        task, "  ".join(f"{n} {out[f'{n}_kafka_median_ms']}->{out[f'{n}_gateway_median_ms']} ms" for n in COMMANDS)
    )
    return out
