"""A running engine for one scenario: a fresh namespace, the processor, the timer service and
worker subprocesses, and a connected client."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from kadence import Client
from kadence.topics import Catalogue, KafkaConfig

from . import workloads
from .common import QUEUE, BenchError, Context, Procs, broker_process, free_port, new_namespace
from .load import Recorder, run_workflow


@dataclass
class Engine:
    config: KafkaConfig
    procs: Procs
    client: Client

    def pids(self) -> dict:
        out = {name: p.pid for name, p in self.procs.procs.items()}
        out["broker"] = broker_process(self.config.bootstrap)
        out["bench"] = os.getpid()
        return out


async def wait_ready(eng: Engine, timeout: float = 90.0) -> None:
    """Until a one-activity workflow completes end to end (processor restored, worker joined)."""
    rec = Recorder()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        eng.procs.check_alive()
        await run_workflow(
            eng.client,
            workloads.OneActivity,
            1,
            rec,
            wid=f"ready-{time.monotonic_ns()}",
            timeout=min(30.0, max(1.0, deadline - time.monotonic())),
        )
        if rec.done:
            return
    raise BenchError(f"engine not ready within {timeout}s: {rec.errors[-3:]}; logs in {eng.procs.logdir}")


@contextlib.asynccontextmanager
async def engine(
    ctx: Context,
    tag: str,
    *,
    timers: bool = True,
    workers: int | None = None,
    processor_env: dict | None = None,
    worker_env: dict | None = None,
    tracer_provider=None,
    codec=None,
    replication: int | None = None,
):
    settings = ctx.settings
    loop = asyncio.get_running_loop()
    config = await loop.run_in_executor(None, functools.partial(new_namespace, settings, tag, replication=replication))
    procs = Procs(config, settings.logdir, tag)
    client = None
    try:
        for i in range(max(1, settings.processors)):
            procs.start_processor(f"p{i}", **(processor_env or {}))
        if timers:
            procs.start_timers("t0")
        for i in range(settings.workers if workers is None else workers):
            procs.start_worker(f"w{i}", **(worker_env or {}))
        for i in range(max(1, settings.processors)):
            await procs.wait_log(f"p{i}", r"assigned partitions", 90)
        client = await Client.connect(config=config, tracer_provider=tracer_provider, codec=codec)
        eng = Engine(config, procs, client)
        await wait_ready(eng)
        yield eng
    finally:
        if client is not None:
            await client.close()
        await loop.run_in_executor(None, procs.close)


def count_records(
    config: KafkaConfig, topics: list[str], t0_ms: float, t1_ms: float, timeout: float = 120.0
) -> dict[str, int]:
    """Records per topic whose Kafka timestamp falls in [t0_ms, t1_ms) (committed records only;
    transaction markers are not records)."""
    consumer = Consumer(config.consumer(None, **{"fetch.wait.max.ms": 10, "enable.partition.eof": False}))
    counts = {t: 0 for t in topics}
    try:
        md = consumer.list_topics(timeout=10)
        tps = [TopicPartition(t, p, int(t0_ms)) for t in topics if t in md.topics for p in md.topics[t].partitions]
        if not tps:
            return counts
        starts = consumer.offsets_for_times(tps, timeout=30)
        ends = {}
        assign = []
        for tp in starts:
            _low, high = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=10)
            if tp.offset < 0 or tp.offset >= high:
                continue
            ends[(tp.topic, tp.partition)] = high
            assign.append(tp)
        if not assign:
            return counts
        consumer.assign(assign)
        remaining = set(ends)
        deadline = time.monotonic() + timeout
        while remaining and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=5000, timeout=0.5):
                if msg.error():
                    continue
                ts = msg.timestamp()[1]
                if t0_ms <= ts < t1_ms:
                    counts[msg.topic()] += 1
            positions = consumer.position([TopicPartition(t, p) for (t, p) in remaining])
            for tp in positions:
                if tp.offset >= ends[(tp.topic, tp.partition)]:
                    remaining.discard((tp.topic, tp.partition))
        return counts
    finally:
        consumer.close()


def output_topics(config: KafkaConfig) -> dict[str, list[str]]:
    cat = Catalogue(config)
    from kadence.topics import TIMER_TIERS_MS

    return {
        "history": [cat.history],
        "state": [cat.state],
        "tasks": [cat.workflow_tasks(QUEUE), cat.activity_tasks(QUEUE)],
        "replies": [cat.replies],
        "timers": [cat.timers(t) for t in TIMER_TIERS_MS],
        "commands": [cat.commands],
    }


async def serve_gateway(ctx: Any, eng: Engine, task: Any) -> tuple[str, int, dict[str, str]]:
    """A ``kadence gateway`` subprocess serving ``eng``'s namespace: (its URL, its port, the headers
    a request needs). With ``KADENCE_REDIS_URL`` set, API keys are on (each request pays the key
    check, the token bucket and the Idempotency-Key fingerprint; quotas disabled for the run);
    without it ``--no-auth``."""
    import httpx

    redis_url = os.environ.get("KADENCE_REDIS_URL")
    port = free_port()
    env = {"KADENCE_GATEWAY_NS_LIMIT": "0", "KADENCE_GATEWAY_KEY_LIMIT": "0"}
    headers: dict[str, str] = {}
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
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        while True:
            eng.procs.check_alive()
            try:
                if (await http.get("/readyz")).status_code == 200:
                    return url, port, headers
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise BenchError(f"the gateway did not get ready; log: {eng.procs.logs['gw']}")
            await asyncio.sleep(0.2)
