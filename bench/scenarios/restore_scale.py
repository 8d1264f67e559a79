"""Scenario: a shard's restore time as it grows (issue 43: 10k, 100k and 1M workflows in one
partition; target: 100k under 10 s).

Opening a million workflows through the engine takes most of an hour on this machine, so the
scenario opens ``SEED_WORKFLOWS`` real ones (``IdleSleeper``: each waits on a one-hour timer, its
run open) in a one-partition namespace, takes one of them's state and history records as the
engine wrote them, and produces copies under other workflow and run IDs of the same length
(Avro strings keep their length prefix, so every copy decodes as the original does) until the
partition holds each size of ``KADENCE_BENCH_RESTORE_SIZES`` (``10000,100000,1000000``). At each
size the processor is stopped (SIGTERM) and started again; its ``restored partition`` line gives
the restore time. Records are produced without a transaction (a ``read_committed`` restore
reads them as it reads the engine's)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import signal
import time
import uuid

from confluent_kafka import Producer

from .. import workloads
from ..common import Context
from ..engine import engine

SEED_WORKFLOWS = 200
RESTORED = re.compile(r"restored partition 0: (\d+) workflows \((\d+) open, \d+ quarantined\) in ([\d.]+)s")
ID_WIDTH = 9  # "idle-" + 9 digits: every workflow ID the same length


def _wid(i: int) -> str:
    return f"idle-{i:0{ID_WIDTH}d}"


def _templates(config, workflow_id: str) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]], str]:
    """(state records, history records, run ID) of ``workflow_id`` as the engine wrote them: every
    state record (a copy costs the restore what the original does, superseded records included)."""
    from kadence.processors.store import read_partition

    states: list[tuple[bytes, bytes]] = []
    events: list[tuple[bytes, bytes]] = []

    def keep_state(key, value, _offset):
        if key == workflow_id.encode() and value is not None:
            states.append((key, value))

    def keep_event(key, value, _offset):
        if key is not None and key.startswith(workflow_id.encode() + b"/") and value is not None:
            events.append((key, value))

    read_partition(config, f"{config.namespace}.state", 0, keep_state)
    read_partition(config, f"{config.namespace}.history", 0, keep_event)
    run_id = events[0][0].decode().split("/")[1]
    return states, events, run_id


def _produce_copies(config, templates, start: int, stop: int, progress) -> None:
    states, events, run_id = templates
    old_wid, old_run = _wid(0).encode(), run_id.encode()
    producer = Producer(
        config.producer(**{"linger.ms": 50, "batch.size": 1 << 20, "compression.type": "lz4", "acks": "all"})
    )
    try:
        for i in range(start, stop):
            new_wid, new_run = _wid(i).encode(), str(uuid.uuid4()).encode()
            for topic, records in ((f"{config.namespace}.state", states), (f"{config.namespace}.history", events)):
                for key, value in records:
                    k = key.replace(old_wid, new_wid).replace(old_run, new_run)
                    v = value.replace(old_wid, new_wid).replace(old_run, new_run)
                    while True:
                        try:
                            producer.produce(topic, v, k, partition=0)
                            break
                        except BufferError:
                            producer.poll(0.1)
            if i % 10_000 == 0:
                producer.poll(0)
                progress(i)
        assert producer.flush(120) == 0, "copies left unsent"
    finally:
        producer.flush(10)


async def run(ctx: Context) -> dict:
    task = ctx.task("restore_scale")
    loop = asyncio.get_running_loop()
    sizes = [int(x) for x in (os.environ.get("KADENCE_BENCH_RESTORE_SIZES") or "10000,100000,1000000").split(",")]
    one = Context(dataclasses.replace(ctx.settings, partitions=1), ctx.progress, ctx.results)
    rows = []
    async with engine(one, "restore", timers=False) as eng:
        ctx.update(task, f"opening {SEED_WORKFLOWS} idle workflows")
        for i in range(SEED_WORKFLOWS):
            await eng.client.start_workflow(workloads.IdleSleeper, 1.0, id=_wid(i), task_queue="bench", timeout=120)
        await asyncio.sleep(5)  # their first workflow tasks (the timer) complete
        templates = await loop.run_in_executor(None, _templates, eng.config, _wid(0))
        have = SEED_WORKFLOWS
        for size in sizes:
            ctx.update(task, f"producing copies up to {size:,} workflows")
            t0 = time.monotonic()
            await loop.run_in_executor(
                None,
                _produce_copies,
                eng.config,
                templates,
                have,
                size,
                lambda i, size=size: ctx.update(task, f"producing copies: {i:,}/{size:,}"),
            )
            produce_s = time.monotonic() - t0
            have = max(have, size)
            ctx.update(task, f"{size:,} workflows in the shard; restarting the processor")
            await loop.run_in_executor(None, eng.procs.signal, "p0", signal.SIGTERM)
            eng.procs.start_processor("p0")
            (m,) = await eng.procs.wait_log("p0", RESTORED.pattern, 3600)
            rss = None
            try:
                import psutil

                rss = psutil.Process(eng.procs.procs["p0"].pid).memory_info().rss
            except Exception:  # noqa: BLE001 - the size is informative only
                pass
            row = {
                "workflows": int(m.group(1)),
                "open": int(m.group(2)),
                "restore_s": float(m.group(3)),
                "wf_per_s": round(int(m.group(1)) / float(m.group(3)), 1) if float(m.group(3)) else None,
                "produce_s": round(produce_s, 1),
                "processor_rss_after_bytes": rss,
            }
            rows.append(row)
            ctx.update(task, f"{row['workflows']:,} workflows restored in {row['restore_s']} s")
    out = {
        "seed_workflows": SEED_WORKFLOWS,
        "state_records_per_workflow": len(templates[0]),
        "events_per_workflow": len(templates[1]),
        "sizes": rows,
        "target": {"workflows": 100_000, "seconds": 10.0},
    }
    ctx.update(task, "[green]" + ", ".join(f"{r['workflows']:,} in {r['restore_s']} s" for r in rows) + "[/]")
    return out
