"""Scenario: where a light-load workflow's time goes, hop by hop (issue 19).

One workflow at a time (``KADENCE_BENCH_HOPS_WORKFLOWS``, default 40, after 5 not counted), the
3-activity workflow, with tracing on and every span exported to a collector in this process. Each
workflow's trace is a chain: the client's send, the processor's ``process`` spans (the transition
of one command), the worker's workflow-task and activity spans, and the client's receipt of the
result. Sorted by start time, the spans and the gaps between them add up to start -> result; a gap
holds everything no span covers: the rest of the batch, the produce, the transaction commit, the
fetch that hands the next record over, the decode and the hand-over to the event loop.

The table names each step by its two ends (``process StartWorkflow -> workflow_task``) and gives
its p50 over the workflows, with the spans' own p50 beside them; and, from the processor's and
the worker's metrics over the same window, the mean transaction commit time and batch size, which
say how much of a gap is the commit. The floors of this broker are measured in the same run:
``raw_kafka``'s produce -> consume round trip and a one-record transaction commit.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import defaultdict

from kadence.testing.otlp import SpanCollector
from kadence.topics.span_export import engine_tracer_provider

from .. import workloads
from ..common import QUEUE, BenchError, Context, CpuMeter, cpu_per_workflow, metric_delta, new_namespace, percentile
from ..engine import engine
from . import raw_kafka
from .throughput import window


def _label(name: str) -> str:
    # "kadence.process RespondActivityTaskCompleted" -> "process RespondActivityTaskCompleted";
    # user types (workflow and activity names) are dropped so that the steps line up
    parts = name.removeprefix("kadence.").split(" ", 1)
    return parts[0] if parts[0] in ("workflow_task", "activity") else " ".join(parts)


def chain(spans: list, sent_ns: int, received_ns: int) -> list[tuple[str, float]]:
    """One trace as (step, ms) in order: spans and the gaps between them, from the client's send
    to its receipt of the result."""
    out: list[tuple[str, float]] = []
    spans = sorted((s for s in spans if s.kind != 4 or s.start_ns >= sent_ns), key=lambda s: s.start_ns)
    prev_end, prev_name = sent_ns, "client send"
    for s in spans:
        if s.name.startswith("kadence.send"):
            continue
        label = _label(s.name)
        out.append((f"{prev_name} -> {label}", max(0, s.start_ns - prev_end) / 1e6))
        out.append((f"[{label}]", (s.end_ns - s.start_ns) / 1e6))
        prev_end, prev_name = max(prev_end, s.end_ns), label
    out.append((f"{prev_name} -> client receives result", max(0, received_ns - prev_end) / 1e6))
    return out


def table(chains: list[list[tuple[str, float]]]) -> list[dict]:
    """Per step position (the chains of one workflow type have the same shape), p50 and p99."""
    shapes = defaultdict(list)
    for c in chains:
        shapes[tuple(step for step, _ms in c)].append(c)
    if not shapes:
        return []
    shape, same = max(shapes.items(), key=lambda kv: len(kv[1]))
    rows = []
    for i, step in enumerate(shape):
        values = [c[i][1] for c in same]
        rows.append(
            {"step": step, "p50_ms": round(percentile(values, 50), 2), "p99_ms": round(percentile(values, 99), 2)}
        )
    return rows


def _variants() -> dict[str, dict]:
    """``KADENCE_BENCH_HOPS_VARIANTS``: engine settings to compare back to back, as
    ``name=VAR:value+VAR:value,name=...`` (default: one variant, the defaults)."""
    raw = os.environ.get("KADENCE_BENCH_HOPS_VARIANTS", "").strip()
    if not raw:
        return {"default": {}}
    out = {}
    for item in raw.split(","):
        name, _, settings = item.partition("=")
        env = {}
        for pair in filter(None, settings.split("+")):
            var, sep, value = pair.partition(":")
            if not sep:
                raise BenchError(f"KADENCE_BENCH_HOPS_VARIANTS: {pair!r} is not VAR:value")
            env[var.strip()] = value.strip()
        out[name.strip()] = env
    return out


async def _probe(
    ctx: Context, task, label: str, extra: dict, count: int, busy: int, seconds: float, idle_s: float = 10.0
) -> dict:
    collector = SpanCollector()
    env = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        **extra,
    }
    provider = engine_tracer_provider("bench-client", env)
    tracer = provider.get_tracer("bench")
    timings: dict[int, tuple[int, int]] = {}
    e2e: list[float] = []
    saturated = None
    try:
        async with engine(ctx, "hops", processor_env=env, worker_env=env, tracer_provider=provider) as eng:
            m0 = None
            cpu = CpuMeter(eng.pids())
            for i in range(count + 5):
                if i == 5:
                    m0 = eng.procs.metrics()
                    cpu.start()
                with tracer.start_as_current_span("bench.workflow") as span:
                    t0 = time.time_ns()
                    await eng.client.execute_workflow(
                        workloads.ThreeActivities,
                        i,
                        id=f"hops-{i}-{t0}",
                        task_queue=QUEUE,
                        timeout=60,
                        result_timeout=60,
                    )
                    t1 = time.time_ns()
                if i >= 5:
                    timings[span.get_span_context().trace_id] = (t0, t1)
                    e2e.append((t1 - t0) / 1e6)
                ctx.update(task, f"hops {label}: {i + 1}/{count + 5}")
            usage = cpu.stop()
            m1 = eng.procs.metrics()
            idle_cpu = CpuMeter(eng.pids())
            idle_cpu.start()
            ctx.update(task, f"hops {label}: idle {idle_s:.0f} s")
            await asyncio.sleep(idle_s)
            idle = idle_cpu.stop()
            if busy:
                saturated = await window(ctx, task, eng, "three_activity", busy, seconds, f"hops {label}")
        provider.shutdown()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the processes flush their spans as they stop
            await asyncio.sleep(0.2)
            traced = {s.trace_id for s in collector.spans}
            if all(t in traced for t in timings):
                break
    finally:
        collector.close()
    by_trace = defaultdict(list)
    for s in collector.spans:
        if s.trace_id in timings and s.name != "bench.workflow":
            by_trace[s.trace_id].append(s)
    chains = [chain(spans, *timings[t]) for t, spans in by_trace.items()]
    slowest = sorted(by_trace, key=lambda t: timings[t][1] - timings[t][0])[-2:]
    batches = metric_delta(m0, m1, "kadence_processor_batch_size_count")
    commit_s = metric_delta(m0, m1, "kadence_processor_commit_seconds_sum")
    elapsed_s = sum(e2e) / 1000
    return {
        "env": extra,
        "workflows": len(e2e),
        "traced": len(chains),
        "start_to_result_ms": {"p50": round(percentile(e2e, 50), 2), "p99": round(percentile(e2e, 99), 2)},
        "processor_transactions_per_workflow": round(batches / len(e2e), 2) if e2e else None,
        "processor_commit_mean_ms": round(commit_s / batches * 1000, 2) if batches else None,
        # CPU while one workflow at a time ran, per workflow
        "cpu_ms_per_workflow": cpu_per_workflow(usage, elapsed_s, len(e2e)),
        # nothing running: % of one core per process, and in all (the bench process excepted)
        "idle_cpu_percent": {
            **idle,
            "stack": round(sum(v for k, v in idle.items() if k not in ("machine_busy", "bench")), 1),
        },
        "saturated": {"concurrency": busy, "wf_per_s": saturated["wf_per_s"]} if saturated else None,
        "steps": table(chains),
        # the two slowest workflows' chains, in full: where a p99 comes from
        "slowest": [[(step, round(ms, 2)) for step, ms in chain(by_trace[t], *timings[t])] for t in slowest],
    }


async def run(ctx: Context) -> dict:
    count = int(os.environ.get("KADENCE_BENCH_HOPS_WORKFLOWS", "40"))
    rounds = int(os.environ.get("KADENCE_BENCH_HOPS_ROUNDS", "1"))
    busy = int(os.environ.get("KADENCE_BENCH_HOPS_BUSY", "0"))
    seconds = float(os.environ.get("KADENCE_BENCH_HOPS_SECONDS", "15"))
    variants = _variants()
    task = ctx.task("hops")
    ctx.update(task, "hops: the broker's floors (a produce -> consume round trip, a transactional hop)")
    loop = asyncio.get_running_loop()
    floor_config = await loop.run_in_executor(None, lambda: new_namespace(ctx.settings, "hops-floor", queues=()))
    floors = {
        "roundtrip_ms": await loop.run_in_executor(None, raw_kafka.round_trip, floor_config, 3.0),
        "txn_hop": await loop.run_in_executor(None, raw_kafka.txn_hops, floor_config),
    }
    runs: dict[str, list[dict]] = {name: [] for name in variants}
    for round_ in range(rounds):
        for name, extra in variants.items():
            runs[name].append(await _probe(ctx, task, f"{name} {round_ + 1}/{rounds}", extra, count, busy, seconds))
    summary_ = {
        name: {
            "start_to_result_p50_ms": round(sum(r["start_to_result_ms"]["p50"] for r in rs) / len(rs), 2),
            "start_to_result_p99_ms": round(sum(r["start_to_result_ms"]["p99"] for r in rs) / len(rs), 2),
            "saturated_wf_per_s": round(sum(r["saturated"]["wf_per_s"] for r in rs) / len(rs), 1) if busy else None,
        }
        for name, rs in runs.items()
    }
    first = next(iter(runs.values()))[0]
    ctx.update(
        task,
        "[green]hops: "
        + "; ".join(
            f"{n} p50 {v['start_to_result_p50_ms']} ms"
            + (f", {v['saturated_wf_per_s']} wf/s at {busy}" if busy else "")
            for n, v in summary_.items()
        )
        + "[/]",
    )
    return {"summary": summary_, "floors": floors, "runs": runs, "steps": first["steps"], "rounds": rounds}
