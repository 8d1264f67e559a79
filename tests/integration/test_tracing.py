"""One trace per workflow run across the client, the history processor and the worker, on the
real broker (issue 21): spans exported to an in-memory exporter, each component given the
provider explicitly. The run sleeps first, so the timer's firing (a command that carries no
trace) must join the run's trace through its state."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from kadence import Client, Worker, activity, workflow
from kadence.processors import HistoryProcessor, ProcessorConfig, TimerConfig, TimerService
from kadence.testing.otlp import ReceivedSpan, SpanCollector
from kadence.topics import EngineClient, JsonConverter
from kadence.topics.span_export import engine_tracer_provider
from tests.integration.conftest import wait_until
from tests.integration.invariants import histories

ROOT = Path(__file__).resolve().parents[2]


@activity.defn
async def charge(cents: int) -> str:
    # the activity's span is current while it runs: the application's spans and events nest under it
    trace.get_current_span().add_event("card charged", {"cents": cents})
    return f"charged {cents}"


@activity.defn
def receipt(text: str) -> str:  # a sync activity: run on a thread, the span still current
    trace.get_current_span().add_event("receipt printed")
    return text.upper()


@workflow.defn
class TracedOrder:
    @workflow.run
    async def run(self, cents: int) -> str:
        await workflow.sleep(0.3)
        charged = await workflow.execute_activity(charge, cents, start_to_close_timeout=timedelta(seconds=30))
        return await workflow.execute_activity(receipt, charged, start_to_close_timeout=timedelta(seconds=30))


class _Stack:
    """A processor and a timer service in threads of this process, traced to ``provider``."""

    def __init__(self, kafka_config, provider):
        self.proc = HistoryProcessor(
            ProcessorConfig(kafka=kafka_config, instance_id="traced-p0", session_timeout_ms=6000),
            tracer_provider=provider,
        )
        self.timers = TimerService(TimerConfig(kafka=kafka_config, instance_id="traced-t0", session_timeout_ms=6000))
        self.threads = [threading.Thread(target=s.run, daemon=True) for s in (self.proc, self.timers)]

    async def __aenter__(self):
        for t in self.threads:
            t.start()
        await wait_until(lambda: self.proc.started and self.timers.ready.is_set(), 60, "processor and timers to start")
        return self

    async def __aexit__(self, *exc):
        self.proc.stop()
        self.timers.stop()
        for t in self.threads:
            t.join(30)


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


async def _client(kafka_config, provider) -> Client:
    engine = await asyncio.get_running_loop().run_in_executor(
        None, lambda: EngineClient(kafka_config, tracer_provider=provider)
    )
    return Client(engine, JsonConverter())


def _sdk_spans(exporter) -> list[ReceivedSpan]:
    """The in-memory exporter's spans in the collector's shape, so one set of checks reads both."""
    return [
        ReceivedSpan(
            name=s.name,
            trace_id=s.context.trace_id,
            span_id=s.context.span_id,
            parent_span_id=s.parent.span_id if s.parent else None,
            kind=s.kind.value,
            start_ns=s.start_time,
            end_ns=s.end_time,
            attributes=dict(s.attributes),
            events=tuple((e.name, dict(e.attributes)) for e in s.events),
            status_code=s.status.status_code.value,
            status_message=s.status.description or "",
            service_name=None,
        )
        for s in exporter.get_finished_spans()
    ]


@pytest.mark.parametrize("pipeline", ["sdk", "engine"])
async def test_one_trace_follows_a_workflow_from_the_callers_span_to_its_result(kafka_config, pipeline):
    """``sdk``: every span through the OpenTelemetry SDK (a provider the application made);
    ``engine``: the provider ``kadence`` commands make (``engine_tracer_provider``), whose
    engine spans take Kadence's own pipeline to an OTLP/HTTP collector (decision 0042)."""
    collector = None
    if pipeline == "sdk":
        provider, exporter = _provider()
    else:
        collector = SpanCollector()
        provider = engine_tracer_provider("kadence-test", {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint})
    client = await _client(kafka_config, provider)
    try:
        async with _Stack(kafka_config, provider):
            async with Worker(
                client,
                task_queue="traced",
                workflows=[TracedOrder],
                activities=[charge, receipt],
                tracer_provider=provider,
            ):
                with provider.get_tracer("shop").start_as_current_span("checkout") as checkout:
                    handle = await client.start_workflow(TracedOrder, 250, id=f"traced-{pipeline}", task_queue="traced")
                    # every span has ended by now: the processor's ends before its transaction,
                    # so before the reply that result() waits for
                    assert await handle.result(timeout=60) == "CHARGED 250"
    finally:
        await client.close()
        if collector is not None:
            assert provider.force_flush(30_000)
            provider.shutdown()
            collector.close()

    spans = _sdk_spans(exporter) if collector is None else collector.spans
    assert collector is None or collector.bad_requests == 0
    trace_id = checkout.get_span_context().trace_id
    assert {s.trace_id for s in spans} == {trace_id}  # one trace, the caller's
    names = [s.name for s in spans]
    for name in (
        "kadence.send StartWorkflow",
        "kadence.process StartWorkflow",
        "kadence.workflow_task TracedOrder",
        "kadence.process FireTimer",
        "kadence.activity charge",
        "kadence.activity receipt",
        "kadence.process RespondActivityTaskCompleted",
        "kadence.process RespondWorkflowTaskCompleted",
    ):
        assert name in names, f"no {name} span in {sorted(set(names))}"
    # a tree: each span's parent is another span of the trace, up to the caller's
    by_id = {s.span_id: s for s in spans}
    for s in spans:
        if s.name != "checkout":
            assert s.parent_span_id in by_id, f"{s.name} hangs loose"
    send = next(s for s in spans if s.name == "kadence.send StartWorkflow")
    assert send.parent_span_id == checkout.get_span_context().span_id
    # the chain alternates between processes' spans: client -> processor -> worker -> processor ...
    charge_span = next(s for s in spans if s.name == "kadence.activity charge")
    assert by_id[charge_span.parent_span_id].name.startswith("kadence.process ")
    assert charge_span.events == (("card charged", {"cents": 250}),)
    assert [e[0] for e in next(s for s in spans if s.name == "kadence.activity receipt").events] == ["receipt printed"]
    fired = next(s for s in spans if s.name == "kadence.process FireTimer")
    assert by_id[fired.parent_span_id].name == "kadence.process StartWorkflow"  # joined through the run's state
    assert charge_span.attributes["kadence.workflow_id"] == f"traced-{pipeline}"

    # the records carry the trace: every history event of the run names it
    events = histories(kafka_config)[(f"traced-{pipeline}", handle.run_id)]
    assert {e["trace_id"] for e in events} == {format(trace_id, "032x")}
    assert all(e["span_id"] in {format(i, "016x") for i in by_id} for e in events)


async def test_an_untraced_start_leaves_its_run_untraced_even_when_a_traced_caller_awaits_it(kafka_config):
    """A client with no tracer provider sends no context, and the processor and worker, which
    have one, record nothing for its run: tracing is decided where the run starts. A traced
    caller awaiting that run's result gets its own two spans, and the run stays untraced (in
    the bench, before this rule, a sampled result request traced the rest of the run)."""
    provider, exporter = _provider()
    client = await _client(kafka_config, None)  # the global provider: none is set in the tests
    observer = await _client(kafka_config, provider)
    try:
        async with _Stack(kafka_config, provider):
            async with Worker(
                client,
                task_queue="traced",
                workflows=[TracedOrder],
                activities=[charge, receipt],
                tracer_provider=provider,
            ):
                handle = await client.start_workflow(TracedOrder, 7, id="untraced-1", task_queue="traced")
                with provider.get_tracer("ops").start_as_current_span("watch"):  # during the run's sleep
                    watched = await observer.get_workflow_handle("untraced-1", run_id=handle.run_id).result(timeout=60)
                assert watched == "CHARGED 7"
    finally:
        await client.close()
        await observer.close()
    assert sorted(s.name for s in exporter.get_finished_spans()) == [
        "kadence.process AwaitWorkflowResult",
        "kadence.send AwaitWorkflowResult",
        "watch",
    ]
    events = histories(kafka_config)[("untraced-1", handle.run_id)]
    assert {(e["trace_id"], e["span_id"]) for e in events} == {(None, None)}


def test_the_docs_example_prints_one_trace(kafka_config, processors):
    """docs/tracing.md's program, run as the page says, against this test's namespace."""
    processors.start()
    env = {**os.environ, "KADENCE_KAFKA_BOOTSTRAP": kafka_config.bootstrap, "KADENCE_NAMESPACE": kafka_config.namespace}
    run = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "examples" / "tracing.py")],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "'tracking': 'trk-A-1001'" in run.stdout
    names = re.findall(r'^    "name": "([^"]+)"', run.stdout, re.M)
    traces = set(re.findall(r'"trace_id": "(0x[0-9a-f]{32})"', run.stdout))
    assert len(traces) == 1, traces
    for name in (
        "checkout",
        "kadence.send StartWorkflow",
        "kadence.workflow_task OrderFulfilment",
        "kadence.activity charge_payment",
        "kadence.activity ship_order",
    ):
        assert name in names, f"no {name} span in {sorted(set(names))}"
