"""Scenario: what tracing costs (issue 21: within 5 % of the throughput without it).

The same 3-activity workflow, back to back in one run, with tracing off and on. On: every start
is traced under a span of the bench's client, the processor and the worker export their spans over
OTLP/HTTP (``OTEL_TRACES_EXPORTER=otlp``) to a collector in this process, which decodes each
request and counts its spans (so a run that exported nothing shows as such). The modes:

- ``off``: no ``OTEL_*`` variable, no provider;
- ``on``: what ``kadence`` commands set up from ``OTEL_TRACES_EXPORTER=otlp``: Kadence's spans
  take the engine's own pipeline (``topics/span_export.py``, decision 0042), the client's too;
- ``sdk``: every span through the OpenTelemetry SDK (``KADENCE_ENGINE_SPANS=sdk``, and an SDK
  provider in the client): the cost decision 0040 measured, kept as the comparison;
- ``sampled``: ``on`` with the client's sampler keeping one start in ten
  (``parentbased_traceidratio``, 0.1: the engine's spans follow the start's decision).

Metrics are on in all of them (the engine always keeps them). Each mode runs
``KADENCE_BENCH_TRACE_ROUNDS`` times (default 2), alternating ABBA (off, on, sdk, sampled, then
sampled, sdk, on, off, ...), at
``KADENCE_BENCH_TRACE_CONCURRENCY`` (default 256) in flight and at one in flight;
``KADENCE_BENCH_TRACE_SECONDS`` (default 20) is each window's length, and
``KADENCE_BENCH_TRACE_MODES`` (default all four, comma-separated, ``off`` always included) picks
modes: windows on this machine differ by up to 10 % for one mode, so the 5 % question needs more
rounds of fewer modes (``KADENCE_BENCH_TRACE_MODES=on KADENCE_BENCH_TRACE_ROUNDS=6``). Besides the
ratio of the modes' means (``over_off``), the result holds each round's ratio of a mode to that
round's ``off`` window, with their mean and its 95 % confidence interval (``paired_over_off``).

Each window at ``busy`` in flight finds the most a mode sustains, and its rate moves the CPU that
every process (the broker's included) spends per workflow: fewer workflows a second means smaller
batches. ``KADENCE_BENCH_TRACE_RATE`` (default 400; 0 leaves it out) adds a window per mode that
starts that many workflows a second, below what any mode sustains, and measures the CPU per
workflow of all the processes at that same rate (``cpu_ms_per_wf``, paired like the throughput in
``paired_cpu_over_off``): what tracing itself costs, without the change of rate it causes.

``KADENCE_BENCH_TRACE_COLLECTOR=process`` runs the collector in a child process of its own (the
same ``SpanCollector``) instead of on threads of the bench's process, beside the client it
would otherwise share a GIL with."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from kadence.testing.otlp import SpanCollector
from kadence.topics.span_export import engine_tracer_provider

from ..common import Context, CpuMeter, alternating_summary, paired_ratios
from ..engine import engine
from ..load import Recorder, open_loop
from .throughput import SHAPES, window

MODES = ("off", "on", "sdk", "sampled")

_CHILD = """
import sys
from kadence.testing.otlp import SpanCollector
collector = SpanCollector(keep=False)
print(collector.endpoint, flush=True)
for line in sys.stdin:
    print(collector.count, flush=True)
collector.close()
"""


class CollectorProcess:
    """A ``SpanCollector`` (counting only) in a child process: ``endpoint``, ``count``, ``close()``."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self._proc.stdout is not None and self._proc.stdin is not None
        self._in, self._out = self._proc.stdin, self._proc.stdout
        self.endpoint = self._out.readline().strip()
        if not self.endpoint.startswith("http://"):
            raise RuntimeError(f"the collector process did not start: {self.endpoint!r}")

    @property
    def count(self) -> int:
        self._in.write("count\n")
        self._in.flush()
        return int(self._out.readline())

    def close(self) -> None:
        self._in.close()
        self._proc.wait(10)


def _client_provider(mode: str, env: dict):
    sampler = ParentBased(TraceIdRatioBased(0.1 if mode == "sampled" else 1.0))
    if mode == "sdk":
        provider = TracerProvider(resource=Resource.create({"service.name": "bench-client"}), sampler=sampler)
        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{env['OTEL_EXPORTER_OTLP_ENDPOINT']}/v1/traces"))
        )
        return provider
    return engine_tracer_provider("bench-client", env, sampler=sampler)


async def _measure(
    ctx: Context,
    task,
    mode: str,
    round_: int,
    collector: SpanCollector | CollectorProcess,
    busy: int,
    seconds: float,
    rate: float,
):
    env, provider = {}, None
    if mode != "off":
        env = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint}
        if mode == "sdk":
            env["KADENCE_ENGINE_SPANS"] = "sdk"
        provider = _client_provider(mode, env)
    try:
        async with engine(
            ctx, f"trace-{mode}-{round_}", processor_env=env, worker_env=env, tracer_provider=provider
        ) as eng:
            light = await window(ctx, task, eng, "three_activity", 1, seconds, f"tracing {mode} light")
            heavy = await window(ctx, task, eng, "three_activity", busy, seconds, f"tracing {mode} x{busy}")
            fixed = await _rate_window(ctx, task, eng, rate, seconds, f"tracing {mode} {rate:g}/s") if rate else None
    finally:
        if provider is not None:
            provider.shutdown()
    out = {
        "light_wf_per_s": light["wf_per_s"],
        "busy_wf_per_s": heavy["wf_per_s"],
        "busy_cpu_percent": heavy["cpu_percent_of_core"],
    }
    if fixed is not None:
        out["rate"] = fixed
        out["cpu_ms_per_wf"] = fixed["cpu_ms_per_wf"]
    return out


async def _rate_window(ctx: Context, task, eng, rate: float, seconds: float, label: str) -> dict:
    """``rate`` starts a second for ``seconds`` after a warm-up (open loop); the CPU of every
    process over the window, per workflow completed in it."""
    s = ctx.settings
    rec = Recorder()
    t0 = time.monotonic()
    w0, w1 = t0 + s.warmup, t0 + s.warmup + seconds
    runner = asyncio.create_task(open_loop(eng.client, SHAPES["three_activity"][0], rec, rate=rate, until=w1, drain=30))
    cpu = CpuMeter(eng.pids())
    try:
        while (now := time.monotonic()) < w0:
            ctx.update(task, f"{label} warm-up  completed {len(rec.done)}  in flight {rec.inflight}")
            await asyncio.sleep(min(0.25, w0 - now))
        cpu.start()
        while (now := time.monotonic()) < w1:
            recent = len(rec.completed_between(now - 1, now))
            ctx.update(task, f"{label} {now - w0:.0f}/{seconds:.0f}s  in flight {rec.inflight}  ~{recent} wf/s")
            eng.procs.check_alive()
            await asyncio.sleep(min(0.25, w1 - now))
        usage = cpu.stop()
    finally:
        await asyncio.wait({runner}, timeout=60)
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
    done = len(rec.completed_between(w0, w1))
    processes = sum(v for k, v in usage.items() if k != "machine_busy")
    return {
        "started_per_s": rate,
        "wf_per_s": round(done / seconds, 1),
        "errors": len(rec.errors),
        "cpu_percent": usage,
        # every process measured (engine, broker, the bench's client), and the machine's total
        "cpu_ms_per_wf": round(processes / 100 * seconds * 1000 / done, 3) if done else None,
        "machine_ms_per_wf": round(usage["machine_busy"] / 100 * seconds * 1000 / done, 3) if done else None,
    }


async def run(ctx: Context) -> dict:
    seconds = float(os.environ.get("KADENCE_BENCH_TRACE_SECONDS", "20"))
    busy = int(os.environ.get("KADENCE_BENCH_TRACE_CONCURRENCY", "256"))
    rate = float(os.environ.get("KADENCE_BENCH_TRACE_RATE", "400"))
    rounds = int(os.environ.get("KADENCE_BENCH_TRACE_ROUNDS", "2"))
    wanted = [m.strip() for m in os.environ.get("KADENCE_BENCH_TRACE_MODES", ",".join(MODES)).split(",") if m.strip()]
    unknown = set(wanted) - set(MODES)
    if unknown:
        raise ValueError(f"KADENCE_BENCH_TRACE_MODES: unknown {sorted(unknown)}; the modes are {', '.join(MODES)}")
    modes = ["off", *[m for m in MODES[1:] if m in wanted]]
    task = ctx.task("tracing")
    where = os.environ.get("KADENCE_BENCH_TRACE_COLLECTOR", "thread")
    if where not in ("thread", "process"):
        raise ValueError(f"KADENCE_BENCH_TRACE_COLLECTOR={where}: thread (the default) or process")
    collector = SpanCollector(keep=False) if where == "thread" else CollectorProcess()
    runs: dict[str, list[dict]] = {mode: [] for mode in modes}
    try:
        for round_ in range(rounds):
            # ABBA: every other round runs the modes in reverse, so a steady drift over the run
            # does not favour the mode that runs first
            for mode in list(runs) if round_ % 2 == 0 else list(runs)[::-1]:
                before = collector.count
                result = await _measure(ctx, task, mode, round_, collector, busy, seconds, rate)
                result["spans_collected"] = collector.count - before
                runs[mode].append(result)
    finally:
        collector.close()
    mean, ratio = alternating_summary(runs, ("light_wf_per_s", "busy_wf_per_s"), "off")
    paired = paired_ratios(runs, "busy_wf_per_s", "off")
    paired_cpu = paired_ratios(runs, "cpu_ms_per_wf", "off") if rate else {}
    ctx.update(
        task,
        "[green]tracing over off: "
        + "; ".join(
            f"{mode} light {ratio[mode]['light_wf_per_s']}, x{busy} {ratio[mode]['busy_wf_per_s']}"
            + (f" (paired {paired[mode]['mean']}, 95 % CI {paired[mode]['ci95']})" if mode in paired else "")
            + (
                f", CPU per workflow at {rate:g}/s {paired_cpu[mode]['mean']} (95 % CI {paired_cpu[mode]['ci95']})"
                if mode in paired_cpu
                else ""
            )
            for mode in modes[1:]
        )
        + "[/] (spans collected: "
        + ", ".join(f"{mode} {sum(r['spans_collected'] for r in runs[mode])}" for mode in modes[1:])
        + ")",
    )
    return {
        "runs": runs,
        "mean": mean,
        "over_off": ratio,
        "paired_over_off": paired,
        "paired_cpu_over_off": paired_cpu,
        "rate": rate,
        "concurrency": busy,
        "window_s": seconds,
        "rounds": rounds,
        "collector": where,
    }
