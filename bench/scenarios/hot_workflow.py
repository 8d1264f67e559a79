"""Scenario: one hot workflow (issue 45 item 4). Temporal's guidance is at most ~5 signals per
second sustained to one workflow and 10 concurrent updates; here ``KADENCE_BENCH_HOT_SENDERS``
(default 256) client tasks signal one ``HotCounter`` run as fast as each signal's reply comes
back, for the window, while one more task sends ``count`` updates one after another.

Reported: signals per second acknowledged (each a command answered after the engine recorded
it), the update round trip under that load, and the proof that each acknowledged signal was
recorded once and seen once (the run's result: distinct numbers seen, repeats; the history's
``WorkflowSignaled`` events). Then the replay of the run's history by the
``Replayer`` (the cost a worker pays when the run is not in its cache), timed."""

from __future__ import annotations

import asyncio
import itertools
import os
import time

from kadence import Replayer
from kadence.topics.payload import JsonConverter

from .. import workloads
from ..common import QUEUE, Context, CpuMeter, summary
from ..engine import engine


async def run(ctx: Context) -> dict:
    s = ctx.settings
    task = ctx.task("hot_workflow")
    senders = int(os.environ.get("KADENCE_BENCH_HOT_SENDERS", "256"))
    out: dict = {"senders": senders}
    async with engine(ctx, "hot") as eng:
        client = eng.client
        wid = f"hot-{time.monotonic_ns()}"
        first = await client.start_workflow(workloads.HotCounter, id=wid, task_queue=QUEUE)
        handle = client.get_workflow_handle(wid)  # the current run, through continue-as-new
        numbers = itertools.count()
        acked: list[tuple[float, int]] = []
        errors: list[str] = []
        update_ms: list[tuple[float, float]] = []
        stop_at = time.monotonic() + s.warmup + s.seconds

        async def signaller() -> None:
            while time.monotonic() < stop_at:
                n = next(numbers)
                try:
                    await handle.signal(workloads.HotCounter.hit, n)
                except Exception as exc:  # noqa: BLE001 - counted, and the run's result says what arrived
                    errors.append(f"{type(exc).__name__}: {exc}")
                    continue
                acked.append((time.monotonic(), n))

        async def updater() -> None:
            while time.monotonic() < stop_at:
                t = time.monotonic()
                try:
                    await handle.execute_update(workloads.HotCounter.count)
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"update {type(exc).__name__}: {exc}")
                    continue
                update_ms.append((t, (time.monotonic() - t) * 1000))

        w0 = time.monotonic() + s.warmup
        cpu = CpuMeter(eng.pids())
        tasks = [asyncio.create_task(signaller()) for _ in range(senders)] + [asyncio.create_task(updater())]
        started_cpu = False
        while not all(t.done() for t in tasks):
            now = time.monotonic()
            if not started_cpu and now >= w0:
                cpu.start()
                started_cpu = True
            ctx.update(task, f"signals acknowledged {len(acked)}  updates {len(update_ms)}  errors {len(errors)}")
            eng.procs.check_alive()
            await asyncio.wait(tasks, timeout=0.25)
        usage = cpu.stop() if started_cpu else {}
        in_window = [a for a in acked if a[0] >= w0]
        out["signals_per_s"] = round(len(in_window) / s.seconds, 1)
        out["update_round_trip_ms"] = summary([ms for t, ms in update_ms if t >= w0])
        out["updates_per_s"] = round(sum(1 for t, _ in update_ms if t >= w0) / s.seconds, 1)
        out["errors"] = len(errors)
        out["error_samples"] = errors[:3]
        out["cpu_s_per_1000_signals"] = {
            k: round(v / max(1, len(in_window)) * 1000, 3) for k, v in (usage or {}).items()
        }
        # every acknowledged signal recorded once and seen once
        await handle.signal(workloads.HotCounter.stop)
        result = await handle.result(timeout=120)
        runs, run_id = [], first.run_id
        while run_id is not None:  # every run of the chain (continue-as-new)
            events = await client.get_workflow_handle(wid, run_id=run_id).history(raw=True)
            runs.append(events)
            kind, attrs = events[-1]["attributes"]
            run_id = attrs["new_run_id"] if kind == "WorkflowExecutionContinuedAsNew" else None
        events = runs[-1]
        kinds = [e["attributes"][0] for r in runs for e in r]
        recorded = [
            client.converter.from_bytes(attrs["input"])[0]
            for r in runs
            for kind, attrs in (e["attributes"] for e in r)
            if kind == "WorkflowSignaled" and attrs["signal_name"] == "hit"
        ]
        out["runs"] = len(runs)
        out["longest_run_events"] = max(len(r) for r in runs)
        acked_numbers = {n for _t, n in acked}
        out["acknowledged"] = len(acked_numbers)
        out["seen_by_workflow"] = result["distinct"]
        out["seen_twice"] = result["repeats"]
        out["recorded"] = len(set(recorded))
        # a signal a continue-as-new carried is recorded in both runs (seen by the code in the
        # second only): seen_by_workflow == acknowledged and seen_twice == 0 say "once"
        out["recorded_events"] = len(recorded)
        out["acknowledged_not_recorded"] = len(acked_numbers - set(recorded))
        out["workflow_tasks"] = kinds.count("WorkflowTaskCompleted")
        out["history_events"] = len(kinds)
        # the replay a worker without the run in its cache pays (the longest run)
        events = max(runs, key=len)
        ctx.update(task, f"replaying {len(events)} events")
        replayer = Replayer(workflows=[workloads.HotCounter])
        t = time.perf_counter()
        replayed = replayer.replay(events)
        out["replay_s"] = round(time.perf_counter() - t, 3)
        out["replay_ok"] = replayed.ok
        # replay time by history length, up to the engine's limit (a run this long is failed)
        sink = Replayer(workflows=[workloads.SignalSink])
        out["replay_s_by_events"] = {}
        for length in (10_000, 25_000, 49_000):
            built = _sink_history(events, length)
            t = time.perf_counter()
            sink.replay(built)
            out["replay_s_by_events"][length] = round(time.perf_counter() - t, 3)
    return out


def _sink_history(real: list[dict], length: int, per_task: int = 200) -> list[dict]:
    """A ``SignalSink`` history of ``length`` events shaped as the hot run's (``real``): blocks
    of ``per_task`` signals, each followed by a workflow task scheduled and completed."""
    head = real[0]
    signal = next(e for e in real if e["attributes"][0] == "WorkflowSignaled")
    attrs = {**head["attributes"][1], "workflow_type": "SignalSink", "input": JsonConverter().to_bytes([])}
    started = {**head, "attributes": ("WorkflowExecutionStarted", attrs)}
    out = [started]

    def add(kind: str, attrs: dict, request_id=None) -> dict:
        ev = {**head, "seq": len(out) + 1, "attributes": (kind, attrs), "request_id": request_id}
        out.append(ev)
        return ev

    def task() -> None:
        scheduled = add("WorkflowTaskScheduled", {"task_queue": QUEUE, "attempt": 1})
        add("WorkflowTaskCompleted", {"scheduled_seq": scheduled["seq"], "identity": "bench", "build_id": None})

    task()
    n = 0
    while len(out) + per_task + 2 <= length:
        for _ in range(per_task):
            n += 1
            add("WorkflowSignaled", dict(signal["attributes"][1]), request_id=f"s-{n}")
        task()
    return out
