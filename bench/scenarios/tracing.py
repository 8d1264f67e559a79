"""Scenario: what tracing costs (issue 21: within 5 % of the throughput without it).

The same 3-activity workflow, back to back in one run, with tracing off and on. On: the bench's
client traces every start under a span of its own, the processor and the worker export their
spans over OTLP/HTTP (``OTEL_TRACES_EXPORTER=otlp``) to a collector in this process, which
decodes each request and counts its spans (so a run that exported nothing shows as such).
``sampled``: the same, with the client's sampler keeping one start in ten
(``parentbased_traceidratio``, 0.1: the engine's spans follow the start's decision). Off: no
``OTEL_*`` variable, no provider. Metrics are on in all three (the engine always keeps them).
Each mode runs twice, alternating (off, on, sampled, off, on, sampled), at ``KADENCE_BENCH_TRACE_CONCURRENCY``
(default 256) in flight and at one in flight; ``KADENCE_BENCH_TRACE_SECONDS`` (default 20) is
each window's length."""

from __future__ import annotations

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from ..common import Context, alternating_summary
from ..engine import engine
from .throughput import window


class Collector:
    """An OTLP/HTTP trace receiver on loopback that counts the spans it is sent."""

    def __init__(self):
        self.spans = 0
        self.requests = 0
        self._lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = ExportTraceServiceRequest.FromString(body)
                n = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
                with collector._lock:
                    collector.spans += n
                    collector.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, name="otlp-collector", daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


async def _measure(ctx: Context, task, mode: str, round_: int, collector: Collector, busy: int, seconds: float):
    env, provider = {}, None
    if mode != "off":
        env = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint}
        sampler = ParentBased(TraceIdRatioBased(0.1 if mode == "sampled" else 1.0))
        provider = TracerProvider(resource=Resource.create({"service.name": "bench-client"}), sampler=sampler)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{collector.endpoint}/v1/traces")))
    try:
        async with engine(ctx, f"trace-{mode}-{round_}", processor_env=env, worker_env=env,
                          tracer_provider=provider) as eng:
            light = await window(ctx, task, eng, "three_activity", 1, seconds, f"tracing {mode} light")
            heavy = await window(ctx, task, eng, "three_activity", busy, seconds, f"tracing {mode} x{busy}")
    finally:
        if provider is not None:
            provider.shutdown()
    return {"light_wf_per_s": light["wf_per_s"], "busy_wf_per_s": heavy["wf_per_s"],
            "busy_cpu_percent": heavy["cpu_percent_of_core"]}


async def run(ctx: Context) -> dict:
    seconds = float(os.environ.get("KADENCE_BENCH_TRACE_SECONDS", "20"))
    busy = int(os.environ.get("KADENCE_BENCH_TRACE_CONCURRENCY", "256"))
    task = ctx.task("tracing")
    collector = Collector()
    runs: dict[str, list[dict]] = {"off": [], "on": [], "sampled": []}
    try:
        for round_ in range(2):
            for mode in runs:
                before = collector.spans
                result = await _measure(ctx, task, mode, round_, collector, busy, seconds)
                result["spans_collected"] = collector.spans - before
                runs[mode].append(result)
    finally:
        collector.close()
    mean, ratio = alternating_summary(runs, ("light_wf_per_s", "busy_wf_per_s"), "off")
    ctx.update(task, f"[green]tracing on/off: light {ratio['on']['light_wf_per_s']}, x{busy} "
                     f"{ratio['on']['busy_wf_per_s']}; sampled 1 in 10/off: light {ratio['sampled']['light_wf_per_s']}, "
                     f"x{busy} {ratio['sampled']['busy_wf_per_s']}[/] "
                     f"({sum(r['spans_collected'] for r in runs['on'])} + "
                     f"{sum(r['spans_collected'] for r in runs['sampled'])} spans collected)")
    return {"runs": runs, "mean": mean, "over_off": ratio, "concurrency": busy, "window_s": seconds}
