"""Scenario: the inputs of the scale arithmetic (issue 43, docs/performance.md "The design's
workload, recomputed"), measured on a three-node cluster of the scenario's own (RF 3, min ISR 2,
``acks=all``):

- **throughput**: the 3-activity workflow at ``KADENCE_BENCH_CAPACITY_CONCURRENCY`` (256) for
  ``KADENCE_BENCH_SECONDS``: history events per second (counted in the history topic), per
  partition, and per second of the processor's CPU (psutil);
- **open workflows**: ``KADENCE_BENCH_IDLE_WORKFLOWS`` workflows opened that each wait on a one-hour
  timer (``IdleSleeper``), with the projections running: the bytes each adds to the brokers' disks
  (the namespace's partition directories, one replica's worth), to the processor's shard store
  (RocksDB directory) and to Redis (``used_memory``, visibility and history read model);
- **restore**: the processor stopped (SIGTERM) and started again; its ``restored partition`` lines
  give workflows restored per second.

``KADENCE_BENCH_CAPACITY_PARTITIONS`` (4) partitions; with 1 and a large
``KADENCE_BENCH_IDLE_WORKFLOWS`` it measures the restore of that many workflows in one shard."""

from __future__ import annotations

import asyncio
import dataclasses
import glob
import os
import re
import signal
import tempfile
import time

from .. import workloads
from ..common import Context, metric_sum, own_cluster
from ..engine import count_records, engine
from .throughput import window

RESTORED = re.compile(r"restored partition (\d+): (\d+) workflows \((\d+) open, \d+ quarantined\) in ([\d.]+)s")
OPEN_CONCURRENCY = 400


def _dir_bytes(paths) -> int:
    total = 0
    for base in paths:
        for root, _dirs, files in os.walk(base):
            for name in files:
                try:
                    total += os.path.getsize(os.path.join(root, name))
                except OSError:  # a segment deleted or rolled while walking
                    pass
    return total


def _topic_bytes(cluster, namespace: str) -> int:
    """One replica's worth of the namespace's partitions on the brokers' disks."""
    dirs = [d for node in cluster.workdir.glob("node*") for d in (node / "data").glob(f"{namespace}.*")]
    return _dir_bytes(dirs) // 3


def _store_bytes(namespace: str, instance: str = "p0") -> int:
    return _dir_bytes(glob.glob(os.path.join(tempfile.gettempdir(), f"kadence-store-{namespace}-{instance}*")))


async def _redis_used(url: str) -> int:
    import redis.asyncio as aioredis

    r = aioredis.from_url(url)
    try:
        return int((await r.info("memory"))["used_memory"])
    finally:
        await r.aclose()


async def _quiet(sample, quiet_s: float = 3.0, timeout: float = 600.0) -> float:
    """``sample()`` until it has not changed for ``quiet_s``; its last value."""
    last, since, deadline = None, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await sample()
        if value != last:
            last, since = value, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
        await asyncio.sleep(0.5)
    return last


async def run(ctx: Context) -> dict:
    task = ctx.task("capacity")
    loop = asyncio.get_running_loop()
    partitions = int(os.environ.get("KADENCE_BENCH_CAPACITY_PARTITIONS") or 4)
    concurrency = int(os.environ.get("KADENCE_BENCH_CAPACITY_CONCURRENCY") or 256)
    n = ctx.settings.idle_workflows
    redis_url = os.environ.get("KADENCE_REDIS_URL")
    cluster = own_cluster()
    ctx.update(task, "starting a three-node cluster of its own")
    await loop.run_in_executor(None, cluster.start)
    own = Context(
        dataclasses.replace(ctx.settings, bootstrap=cluster.bootstrap, partitions=partitions),
        ctx.progress,
        ctx.results,
    )
    out: dict = {"partitions": partitions, "replication": 3, "concurrency": concurrency, "idle_workflows": n}
    try:
        async with engine(own, "capacity", replication=3) as eng:
            ns = eng.config.namespace
            if redis_url:
                eng.procs.start_projections(redis_url)
            # -- throughput ------------------------------------------------------------------
            await window(own, task, eng, "three_activity", concurrency, max(5.0, own.settings.seconds / 2), "warm-up")
            result = await window(own, task, eng, "three_activity", concurrency, own.settings.seconds, "measure")
            wall0, wall1 = result.pop("_wall")
            history = f"{ns}.history"
            counts = await loop.run_in_executor(None, count_records, eng.config, [history], wall0, wall1)
            counted = counts[history]
            seconds = (wall1 - wall0) / 1000
            events_per_s = counted / seconds
            p0_cores = result["cpu_percent_of_core"]["p0"] / 100
            out["throughput"] = {
                "wf_per_s": result["wf_per_s"],
                "history_events_per_s": round(events_per_s, 1),
                "history_events_per_s_per_partition": round(events_per_s / partitions, 1),
                "processor_cores": round(p0_cores, 3),
                "history_events_per_processor_core_s": round(events_per_s / p0_cores, 1) if p0_cores else None,
                "events_per_wf": round(counted / max(1, result["completed"]), 2),
                "cpu_percent_of_core": result["cpu_percent_of_core"],
            }
            ctx.update(task, f"{events_per_s:.0f} events/s; opening {n} idle workflows")

            # -- open workflows --------------------------------------------------------------
            async def settled_sizes() -> tuple[int, int, int]:
                async def processed() -> float:
                    return metric_sum(eng.procs.metrics(), "kadence_processor_commands_total")

                await _quiet(processed)
                used = await _quiet(lambda: _redis_used(redis_url)) if redis_url else 0
                return _topic_bytes(cluster, ns), _store_bytes(ns), int(used)

            disk0, store0, redis0 = await settled_sizes()
            sem = asyncio.Semaphore(OPEN_CONCURRENCY)
            opened = 0
            t0 = time.monotonic()

            async def one(i: int) -> None:
                nonlocal opened
                async with sem:
                    await eng.client.start_workflow(
                        workloads.IdleSleeper, 1.0, id=f"idle-{i}", task_queue="bench", timeout=300
                    )
                    opened += 1
                    if opened % 1000 == 0:
                        ctx.update(task, f"opening idle workflows: {opened}/{n}")

            await asyncio.gather(*(one(i) for i in range(n)))
            open_s = time.monotonic() - t0
            disk1, store1, redis1 = await settled_sizes()
            out["open_workflows"] = {
                "opened": opened,
                "opened_per_s": round(opened / open_s, 1),
                "disk_bytes_per_workflow": round((disk1 - disk0) / opened),
                "shard_store_bytes_per_workflow": round((store1 - store0) / opened),
                "redis_bytes_per_workflow": round((redis1 - redis0) / opened) if redis_url else None,
            }
            ctx.update(task, f"{out['open_workflows']}; restarting the processor")

            # -- restore ---------------------------------------------------------------------
            await loop.run_in_executor(None, eng.procs.signal, "p0", signal.SIGTERM)
            t_spawn = time.monotonic()
            eng.procs.start_processor("p0")
            matches = await eng.procs.wait_log("p0", RESTORED.pattern, 1800, count=partitions)
            await eng.procs.wait_log("p0", r"assigned partitions", 120)
            restored = sum(int(m.group(2)) for m in matches)
            restore_s = sum(float(m.group(4)) for m in matches)
            out["restore"] = {
                "workflows": restored,
                "open": sum(int(m.group(3)) for m in matches),
                "seconds": round(restore_s, 2),
                "wf_per_s": round(restored / restore_s, 1) if restore_s else None,
                "per_partition_s": [float(m.group(4)) for m in matches],
                "spawn_to_assigned_s": round(time.monotonic() - t_spawn, 2),
            }
    finally:
        await loop.run_in_executor(None, cluster.cleanup)
    tp, ow, rs = out["throughput"], out.get("open_workflows", {}), out.get("restore", {})
    ctx.update(
        task,
        f"[green]{tp['history_events_per_s_per_partition']} events/s per partition, "
        f"{tp['history_events_per_processor_core_s']} per processor core-second; "
        f"{ow.get('disk_bytes_per_workflow')} B disk, {ow.get('shard_store_bytes_per_workflow')} B store, "
        f"{ow.get('redis_bytes_per_workflow')} B Redis per open workflow; restore {rs.get('wf_per_s')} wf/s[/]",
    )
    return out
