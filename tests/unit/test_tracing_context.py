"""The pieces of tracing that need no broker: a gateway request's ``traceparent`` becomes the
current context (so the commands it sends continue the caller's trace), a record's IDs become
a span's parent, bad IDs in a record are ignored, and ``OTEL_TRACES_EXPORTER`` is checked."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from kadence.gateway.middleware import TraceContext
from kadence.topics.errors import ConfigError
from kadence.topics.tracing import Tracer, configure_from_env, provider_from_env, record_ref

TRACE, SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


def _call(headers: list[tuple[bytes, bytes]]):
    seen = {}

    async def app(scope, receive, send):
        seen["context"] = trace.get_current_span().get_span_context()

    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(_message):
        pass

    scope = {"type": "http", "method": "POST", "path": "/v1/workflows", "headers": headers}
    asyncio.run(TraceContext(app)(scope, receive, send))
    return seen["context"]


def test_a_requests_traceparent_is_the_current_context_while_it_runs():
    sc = _call([(b"content-type", b"application/json"), (b"traceparent", f"00-{TRACE}-{SPAN}-01".encode())])
    assert (format(sc.trace_id, "032x"), format(sc.span_id, "016x")) == (TRACE, SPAN) and sc.is_remote
    assert trace.get_current_span().get_span_context().is_valid is False  # detached after the request


def test_a_request_without_one_has_no_context():
    assert not _call([(b"content-type", b"application/json")]).is_valid


def _provider():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_a_records_ids_are_the_parent_of_the_span_and_the_span_stamps_what_follows():
    provider, exporter = _provider()
    tracer = Tracer("processor", provider)
    parent = record_ref({"trace_id": TRACE, "span_id": SPAN})
    with tracer.child("kadence.process StartWorkflow", parent, {"kadence.workflow_id": "w"}) as ref:
        pass
    [span] = exporter.get_finished_spans()
    assert format(span.parent.span_id, "016x") == SPAN and format(span.context.trace_id, "032x") == TRACE
    assert ref == (TRACE, format(span.context.span_id, "016x"))


@pytest.mark.parametrize(
    "record",
    [
        {"trace_id": "not hex", "span_id": SPAN},
        {"trace_id": "0" * 32, "span_id": SPAN},
        {"trace_id": TRACE, "span_id": "0" * 16},
    ],
)
def test_bad_ids_in_a_record_pass_through_without_a_span(record):
    provider, exporter = _provider()
    parent = record_ref(record)
    with Tracer("worker", provider).child("kadence.activity a", parent, {}) as ref:
        pass
    assert ref == parent and exporter.get_finished_spans() == ()


def test_no_provider_passes_the_context_through():
    with Tracer("worker", trace.NoOpTracerProvider()).child("kadence.activity a", (TRACE, SPAN), {}) as ref:
        assert ref == (TRACE, SPAN)


def test_a_record_without_ids_is_untraced():
    assert record_ref({"trace_id": None, "span_id": None}) is None
    assert record_ref({"trace_id": TRACE, "span_id": None}) is None


def test_an_error_inside_the_span_is_recorded_and_raised():
    provider, exporter = _provider()
    with pytest.raises(ValueError):
        with Tracer("worker", provider).child("kadence.activity a", (TRACE, SPAN), {}):
            raise ValueError("boom")
    [span] = exporter.get_finished_spans()
    assert span.status.status_code == trace.StatusCode.ERROR and span.events[0].name == "exception"
    assert dict(span.events[0].attributes) == {"exception.type": "ValueError"}  # not the message "boom"


def test_the_exporter_setting_is_checked():
    assert configure_from_env("kadence-test", {}) is None
    assert configure_from_env("kadence-test", {"OTEL_TRACES_EXPORTER": "none"}) is None
    assert configure_from_env("kadence-test", {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}) is None
    with pytest.raises(ConfigError, match="zipkin"):
        configure_from_env("kadence-test", {"OTEL_TRACES_EXPORTER": "zipkin"})


def test_otlp_alone_gives_the_engines_spans_their_own_pipeline_unless_told_sdk():
    engine = provider_from_env("kadence-test", {"OTEL_TRACES_EXPORTER": "otlp"})
    sdk = provider_from_env("kadence-test", {"OTEL_TRACES_EXPORTER": "otlp", "KADENCE_ENGINE_SPANS": "sdk"})
    both = provider_from_env("kadence-test", {"OTEL_TRACES_EXPORTER": "otlp,console"})
    try:
        assert engine.engine_spans.target.endpoint == "http://localhost:4318/v1/traces"
        assert Tracer("processor", engine)._spans is engine.engine_spans
        assert not hasattr(sdk, "engine_spans") and not hasattr(both, "engine_spans")
        assert Tracer("processor", sdk)._spans is None
    finally:
        for provider in (engine, sdk, both):
            provider.shutdown()
    with pytest.raises(ConfigError, match="KADENCE_ENGINE_SPANS"):
        provider_from_env("kadence-test", {"OTEL_TRACES_EXPORTER": "otlp", "KADENCE_ENGINE_SPANS": "fast"})
