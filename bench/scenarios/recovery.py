"""Scenario 6: recovery after a processor crash.

Under light load (a few 3-activity workflows in flight) the processor is SIGKILLed and a
replacement with the same instance ID is started at once (as a supervisor would). Recovery time
= kill -> the first history event committed by the new processor is readable (read_committed
consumer on ``{ns}.history``, event produced after the kill). Also reported: kill -> first
workflow completed."""

from __future__ import annotations

import asyncio
import re
import signal
import threading
import time

from confluent_kafka import Consumer, TopicPartition

from .. import workloads
from ..common import BenchError, Context, poll_ready
from ..engine import engine
from ..load import Recorder, closed_loop

CONCURRENCY = 4


def _tail(config, stop: threading.Event, seen: list) -> None:
    topic = f"{config.namespace}.history"
    consumer = Consumer(config.consumer(None, **{"fetch.wait.max.ms": 10}))
    try:
        md = consumer.list_topics(topic, timeout=10).topics[topic]
        tps = []
        for p in md.partitions:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            tps.append(TopicPartition(topic, p, high))
        consumer.assign(tps)
        while not stop.is_set():
            for msg in poll_ready(consumer, 500, 0.05):
                if msg.error() is None:
                    seen.append((time.time() * 1000, msg.timestamp()[1]))
    finally:
        consumer.close()


class FirstProgress:
    """The first history event committed (``seen``, from ``_tail``) and the first workflow
    completed (``rec``) after a moment (``wall_ms``: epoch ms, ``mono``: monotonic s); both in
    seconds from it, None until seen."""

    def __init__(self, seen: list, rec: Recorder, wall_ms: float, mono: float):
        self.seen, self.rec, self.wall_ms, self.mono = seen, rec, wall_ms, mono
        self.event_s: float | None = None
        self.done_s: float | None = None

    def update(self) -> bool:
        """Look again; whether both have been seen."""
        if self.event_s is None:
            after = [recv for recv, ts in list(self.seen) if ts > self.wall_ms]
            if after:
                self.event_s = (min(after) - self.wall_ms) / 1000
        if self.done_s is None:
            done = [d.finished for d in self.rec.done if d.finished > self.mono]
            if done:
                self.done_s = min(done) - self.mono
        return self.event_s is not None and self.done_s is not None


async def run(ctx: Context) -> dict:
    s = ctx.settings
    task = ctx.task("recovery")
    loop = asyncio.get_running_loop()
    out: dict = {}
    async with engine(ctx, "recovery") as eng:
        stop = threading.Event()
        seen: list = []
        tail = threading.Thread(target=_tail, args=(eng.config, stop, seen), daemon=True)
        tail.start()
        rec = Recorder()
        horizon = time.monotonic() + 3600
        runner = asyncio.create_task(
            closed_loop(eng.client, workloads.ThreeActivities, rec, concurrency=CONCURRENCY, until=horizon)
        )
        try:
            await asyncio.sleep(max(3.0, s.warmup))
            before = len(rec.done)
            if before == 0:
                raise BenchError("no workflow completed before the kill")
            ctx.update(task, "SIGKILL the processor; starting its replacement")
            kill_wall = time.time() * 1000
            kill_mono = time.monotonic()
            eng.procs.procs["p0"].send_signal(signal.SIGKILL)
            await loop.run_in_executor(None, eng.procs.procs["p0"].wait)
            eng.procs.procs.pop("p0")
            eng.procs.start_processor("p0")
            progress = FirstProgress(seen, rec, kill_wall, kill_mono)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not progress.update():
                ctx.update(task, f"waiting since the kill: {time.monotonic() - kill_mono:.1f}s")
                await asyncio.sleep(0.02)
            first_event, first_done = progress.event_s, progress.done_s
            log = eng.procs.log_text("p0")
            restored = [float(x) for x in re.findall(r"restored partition \d+: .* in ([\d.]+)s", log)]
            out = {
                "recovery_s": round(first_event, 2) if first_event is not None else None,
                "first_completion_after_kill_s": round(first_done, 2) if first_done is not None else None,
                "restore_seconds_sum": round(sum(restored), 3),
                "concurrency": CONCURRENCY,
                "errors": len(rec.errors),
                "what": "SIGKILL -> first history event committed by the replacement",
            }
        finally:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            stop.set()
            await loop.run_in_executor(None, tail.join, 5)
    ctx.update(
        task,
        f"[green]recovered in {out.get('recovery_s')} s (first workflow completed "
        f"{out.get('first_completion_after_kill_s')} s after the kill)[/]",
    )
    return out
