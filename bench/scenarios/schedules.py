"""Scenario ``schedules`` (issue 47): the lateness of many schedules firing at once.

``KADENCE_BENCH_SCHEDULES`` schedules (default 10,000), each every minute, their offsets spread
over the minute (schedule i at i * 60 s / N past it: 167 times a second at the default), each
starting a run that does nothing (``bench.workloads.Scheduled``, on a worker subprocess); the
schedules run on a ``kadence schedules worker`` subprocess. After they are all created, times
are measured for ``KADENCE_BENCH_SCHEDULE_SECONDS`` (default 120). A time's *lateness* is the
``WorkflowExecutionStarted`` event of its run (read back from ``{ns}.history``, read_committed)
minus the nominal time its workflow ID names. Reported: lateness p50/p95/p99/max, the runs
started against the times due, runs started twice (must be 0), the rate of creates, and CPU.
The issue's target: p99 < 200 ms."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import threading
import time
from datetime import UTC, datetime

from confluent_kafka import Consumer, TopicPartition

from kadence import ScheduleInterval, ScheduleSpec, schedule_action
from kadence.topics import Catalogue, serde

from ..common import QUEUE, BenchError, Context, CpuMeter, broker_process, poll_ready, summary
from ..engine import engine

PERIOD_MS = 60_000
_STAMP = re.compile(r"^bsched-\d+-(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{3})?)Z$")


def _nominal(workflow_id: str) -> int | None:
    m = _STAMP.match(workflow_id)
    if not m:
        return None
    return int(datetime.fromisoformat(m.group(1)).replace(tzinfo=UTC).timestamp() * 1000)


def _watch(config, stop: threading.Event, started: dict[str, list[int]]) -> None:
    """Every scheduled run's start event: workflow ID -> [event time (ms), ...]."""
    cat = Catalogue(config)
    consumer = Consumer(config.consumer(None, **{"isolation.level": "read_committed", "fetch.wait.max.ms": 10}))
    codec = serde.codec("HistoryEvent")
    try:
        md = consumer.list_topics(cat.history, timeout=10).topics[cat.history]
        consumer.assign([TopicPartition(cat.history, p, 0) for p in md.partitions])
        while not stop.is_set():
            for msg in poll_ready(consumer, 1000, 0.1):
                if msg.error() or not msg.value():
                    continue
                ev = codec.decode(msg.value())
                if ev["attributes"][0] == "WorkflowExecutionStarted" and ev["aggregate_key"].startswith("bsched-"):
                    started.setdefault(ev["aggregate_key"], []).append(ev["timestamp_ms"])
    finally:
        consumer.close()


async def run(ctx: Context) -> dict:
    n = int(os.environ.get("KADENCE_BENCH_SCHEDULES", "10000"))
    seconds = float(os.environ.get("KADENCE_BENCH_SCHEDULE_SECONDS", "120"))
    task = ctx.task("schedules")
    loop = asyncio.get_running_loop()
    started: dict[str, list[int]] = {}
    stop = threading.Event()
    async with engine(ctx, "schedules", workers=1) as eng:
        eng.procs._spawn("schedules", [sys.executable, "-m", "kadence.cli", "schedules", "worker"], eng.procs._env())
        watcher = threading.Thread(target=_watch, args=(eng.config, stop, started), daemon=True)
        watcher.start()
        action = schedule_action("BenchScheduled", task_queue=QUEUE)
        t0 = time.monotonic()
        for first in range(0, n, 500):
            await asyncio.gather(
                *(
                    eng.client.create_schedule(
                        f"bsched-{i}",
                        spec=ScheduleSpec(
                            intervals=[ScheduleInterval(every_ms=PERIOD_MS, offset_ms=i * PERIOD_MS // n)]
                        ),
                        action=action,
                        request_id=f"bsched-{i}",
                    )
                    for i in range(first, min(n, first + 500))
                )
            )
            ctx.update(task, f"created {min(n, first + 500)} of {n} schedules")
        created_s = time.monotonic() - t0
        # measure the times due from a whole minute after the last create (every schedule has
        # taken its first task by then, or is late by that much: also counted)
        w0 = (int(time.time() * 1000) // PERIOD_MS + 1) * PERIOD_MS
        w1 = w0 + int(seconds * 1000)
        procs = eng.procs.procs
        cpu = CpuMeter(
            {
                **{name: p.pid for name, p in procs.items()},
                "broker": broker_process(eng.config.bootstrap),
            }
        )
        await asyncio.sleep(max(0.0, w0 / 1000 - time.time()))
        cpu.start()
        while time.time() * 1000 < w1 + 5000:  # 5 s for the last times' runs to start
            late = sum(1 for wf in list(started) if (_nominal(wf) or 0) >= w0)
            ctx.update(task, f"measuring: {late} runs of the window started")
            await asyncio.sleep(1.0)
        usage = cpu.stop()
        await asyncio.sleep(5.0)
        stop.set()
        await loop.run_in_executor(None, watcher.join, 30)
    window = {wf: ts for wf, ts in started.items() if w0 <= (_nominal(wf) or 0) < w1}
    lateness = [min(ts) - (_nominal(wf) or 0) for wf, ts in window.items()]
    expected = 0
    for i in range(n):
        offset = i * PERIOD_MS // n
        first = (w0 - offset + PERIOD_MS - 1) // PERIOD_MS * PERIOD_MS + offset
        expected += max(0, (w1 - 1 - first) // PERIOD_MS + 1) if first < w1 else 0
    twice = sum(1 for ts in started.values() if len(ts) > 1)
    if not lateness:
        raise BenchError(f"no run of the {expected} times due in the window started")
    lat = summary(lateness)
    ctx.update(
        task, f"[green]{n} schedules: lateness p99 {lat['p99']} ms, {len(window)} of {expected} times started[/]"
    )
    return {
        "schedules": n,
        "seconds": seconds,
        "create_per_s": round(n / created_s, 1),
        "times_due": expected,
        "runs_started": len(window),
        "started_twice": twice,
        "lateness_ms": lat,
        "cpu_percent": usage,
    }
