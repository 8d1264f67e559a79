"""Scenario: the cost of replication (issue 43): the 3-activity throughput on namespaces with
replication factor 3 (``min.insync.replicas`` 2; the engine's producers write with
``acks=all``) beside replication factor 1, on one three-node KRaft cluster the scenario starts
for itself (``kadence.devstack.cluster.KafkaCluster``, PLAINTEXT; the bench's own broker is not
used). Both namespaces run on the same three brokers, so the ratio is the price of the replicas,
not of a bigger cluster.

One engine per factor (processor, timer service, worker), both kept running, each warmed up
by an unmeasured half window first (the first window on a fresh cluster ran at half the speed
of the next in the first try); the windows
alternate in ABBA order (RF 1, RF 3, RF 3, RF 1, ...) at one concurrency
(``KADENCE_BENCH_REPLICATION_CONCURRENCY``, default 256), ``KADENCE_BENCH_SECONDS`` each, over
``KADENCE_BENCH_REPLICATION_ROUNDS`` rounds (default 2, four windows); each round's RF 3 window is
paired with its RF 1 window and the mean ratio is reported with a 95 % confidence interval.
The issue's target: RF 3 at least 0.6x RF 1."""

from __future__ import annotations

import asyncio
import dataclasses
import os

from ..common import Context, own_cluster, paired_ratios
from ..engine import engine
from .throughput import window

TARGET = 0.6


async def run(ctx: Context) -> dict:
    task = ctx.task("replication")
    loop = asyncio.get_running_loop()
    concurrency = int(os.environ.get("KADENCE_BENCH_REPLICATION_CONCURRENCY") or 256)
    rounds = int(os.environ.get("KADENCE_BENCH_REPLICATION_ROUNDS") or 2)
    seconds = ctx.settings.seconds
    cluster = own_cluster()
    ctx.update(task, "starting a three-node cluster of its own")
    await loop.run_in_executor(None, cluster.start)
    own = Context(dataclasses.replace(ctx.settings, bootstrap=cluster.bootstrap), ctx.progress, ctx.results)
    windows: dict[int, list[float]] = {1: [], 3: []}
    details: dict[int, list[dict]] = {1: [], 3: []}
    try:
        async with engine(own, "rf1", replication=1) as rf1, engine(own, "rf3", replication=3) as rf3:
            engines = {1: rf1, 3: rf3}
            for rf, eng in engines.items():  # not measured: a cold cluster's first window ran at half speed
                await window(own, task, eng, "three_activity", concurrency, max(5.0, seconds / 2), f"RF {rf} warm-up")
            order = [m for i in range(rounds) for m in ((1, 3) if i % 2 == 0 else (3, 1))]
            for i, rf in enumerate(order, 1):
                label = f"RF {rf} ({i}/{len(order)})"
                result = await window(own, task, engines[rf], "three_activity", concurrency, seconds, label)
                result.pop("_wall")
                windows[rf].append(result["wf_per_s"])
                details[rf].append(result)
    finally:
        await loop.run_in_executor(None, cluster.cleanup)
    # round k's RF 1 and RF 3 windows were measured next to each other
    runs = {f"rf{rf}": [{"wf_per_s": x} for x in xs] for rf, xs in windows.items()}
    ratio = paired_ratios(runs, "wf_per_s", "rf1").get("rf3", {})
    out = {
        "concurrency": concurrency,
        "seconds": seconds,
        "rf1_wf_per_s": windows[1],
        "rf3_wf_per_s": windows[3],
        "rf3_over_rf1": ratio,
        "target": TARGET,
        "rf1_windows": details[1],
        "rf3_windows": details[3],
    }
    mean = ratio.get("mean")
    ctx.update(task, f"[green]RF 3 / RF 1 = {mean}[/] (RF 1 {windows[1]}, RF 3 {windows[3]} wf/s)")
    return out
