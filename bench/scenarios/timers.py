"""Scenario 3: timer lateness of the timer service at a steady rate of new timers.

The benchmark produces ``TimerRecord``s straight to the delay tier the processor would choose
(``choose_tier``), at ``KADENCE_BENCH_TIMER_RATE`` per second (default 1,000), each due in a
random 0.2-5 s, and reads the ``FireTimer`` commands back from ``{ns}.commands``. No processor
runs: this isolates the timer service. Lateness = when the FireTimer command was readable
(received by the benchmark's consumer) minus the timer's due time; ``fire_ts`` is the same with
the timer service's own fire time (the command's Kafka timestamp)."""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from kadence.processors.timer_config import choose_tier
from kadence.topics import Catalogue, serde

from ..common import BenchError, Context, CpuMeter, Procs, broker_process, new_namespace, poll_ready, summary

MIN_DELAY_S, MAX_DELAY_S = 0.2, 5.0


def _delays() -> tuple[float, float]:
    """``KADENCE_BENCH_TIMER_DELAY_S`` (``"55-65"``): the range timers are due in (default 0.2-5 s,
    all on the near tier); longer timers pass through the coarser tiers first (a schedule's are
    about a minute: set ``KADENCE_BENCH_WARMUP`` past the longest delay to measure them)."""
    text = os.environ.get("KADENCE_BENCH_TIMER_DELAY_S", "")
    if not text:
        return MIN_DELAY_S, MAX_DELAY_S
    low, sep, high = text.partition("-")
    try:
        lo, hi = float(low), float(high if sep else low)
    except ValueError:
        raise BenchError(f"KADENCE_BENCH_TIMER_DELAY_S={text!r}: a range of seconds such as 55-65") from None
    if not 0 < lo <= hi:
        raise BenchError(f"KADENCE_BENCH_TIMER_DELAY_S={text!r}: from a positive low to a high at least as large")
    return lo, hi


def _consume(config, stop: threading.Event, seen: dict, dupes: list) -> None:
    cat = Catalogue(config)
    consumer = Consumer(config.consumer(None, **{"fetch.wait.max.ms": 10}))
    codec = serde.codec("Command")
    try:
        md = consumer.list_topics(cat.commands, timeout=10).topics[cat.commands]
        tps = []
        for p in md.partitions:
            _low, high = consumer.get_watermark_offsets(TopicPartition(cat.commands, p), timeout=10)
            tps.append(TopicPartition(cat.commands, p, high))
        consumer.assign(tps)
        while not stop.is_set():
            for msg in poll_ready(consumer, 1000, 0.1):
                if msg.error():
                    continue
                recv = time.time() * 1000
                cmd = codec.decode(msg.value())
                kind, body = cmd["body"]
                if kind != "FireTimer":
                    continue
                if body["timer_id"] in seen:
                    dupes.append(body["timer_id"])
                    continue
                seen[body["timer_id"]] = (recv, msg.timestamp()[1], body["fire_at_ms"])
    finally:
        consumer.close()


def _produce(config, rate: float, stop_at_wall: float, due: dict, delays: tuple[float, float]) -> None:
    cat = Catalogue(config)
    producer = Producer(config.producer(**{"linger.ms": 5}))
    codec = serde.codec("TimerRecord")
    tick = 0.01
    per_tick = rate * tick
    owed = 0.0
    i = 0
    next_t = time.monotonic()
    while time.time() * 1000 < stop_at_wall:
        owed += per_tick
        while owed >= 1:
            owed -= 1
            now = time.time() * 1000
            fire = int(now + random.uniform(*delays) * 1000)
            tid = str(i)
            wid = f"tl-{i % 10_000}"
            rec = {
                "workflow_id": wid,
                "run_id": "bench",
                "timer_id": tid,
                "fire_at_ms": fire,
                "kind": "user",
                "scheduled_seq": 0,
                "attempt": 0,
            }
            while True:
                try:
                    producer.produce(cat.timers(choose_tier(fire - int(now))), codec.encode(rec), wid.encode())
                    break
                except BufferError:
                    producer.poll(0.01)
            due[tid] = fire
            i += 1
        producer.poll(0)
        next_t += tick
        delay = next_t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    producer.flush(30)


async def run(ctx: Context) -> dict:
    s = ctx.settings
    task = ctx.task("timers")
    loop = asyncio.get_running_loop()
    config = await loop.run_in_executor(None, new_namespace, s, "timers")
    procs = Procs(config, s.logdir, "timers")
    stop = threading.Event()
    seen: dict = {}
    dupes: list = []
    due: dict = {}
    consumer = threading.Thread(target=_consume, args=(config, stop, seen, dupes), daemon=True)
    try:
        procs.start_timers("t0")
        await procs.wait_log("t0", r"assigned \d+ partitions", 90)
        consumer.start()
        await asyncio.sleep(1.0)  # consumer assigned
        wall_start = time.time() * 1000
        w0 = wall_start + s.warmup * 1000
        w1 = w0 + s.seconds * 1000
        cpu = CpuMeter({"timers": procs.procs["t0"].pid, "broker": broker_process(config.bootstrap)})
        cpu.start()
        delays = _delays()
        producer = loop.run_in_executor(None, _produce, config, s.timer_rate, w1, due, delays)
        last_due = w1 + delays[1] * 1000
        while True:
            now = time.time() * 1000
            if now > last_due + 3000:
                break
            procs.check_alive()
            ctx.update(
                task,
                f"{'warm-up' if now < w0 else 'measuring' if now < w1 else 'last fires'}  "
                f"scheduled {len(due)}  fired {len(seen)}  duplicates {len(dupes)}",
            )
            await asyncio.sleep(0.25)
        await producer
        usage = cpu.stop()
    finally:
        stop.set()
        if consumer.is_alive():
            await loop.run_in_executor(None, consumer.join, 5)
        await loop.run_in_executor(None, procs.close)
    in_window = [tid for tid, fire in due.items() if w0 <= fire < w1]
    late_recv, late_ts, missing = [], [], 0
    for tid in in_window:
        got = seen.get(tid)
        if got is None:
            missing += 1
            continue
        recv, ts, fire = got
        late_recv.append(recv - fire)
        late_ts.append(ts - fire)
    out = summary(late_recv)
    out.update(
        {
            "what": "FireTimer command readable on the commands topic minus due time (ms)",
            "fire_ts": summary(late_ts),
            "rate_per_s": s.timer_rate,
            "timers_due_in_window": len(in_window),
            "missing": missing,
            "duplicates": len(dupes),
            "early": sum(1 for x in late_ts if x < 0),
            "delays_s": list(delays),
            "cpu_percent_of_core": usage,
        }
    )
    ctx.update(
        task,
        f"[green]lateness p50 {out['p50']} ms p99 {out['p99']} ms[/] ({len(in_window)} timers, "
        f"{missing} missing, {len(dupes)} duplicates)",
    )
    return out
