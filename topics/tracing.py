"""Tracing with OpenTelemetry: one trace per workflow run, from the call that started it to its
result, across the client, the history processor and the workers.

A trace context crosses Kafka in the records themselves: ``trace_id`` (32 hex digits) and
``span_id`` (16 hex digits, the span that wrote the record) on every ``Command``, ``HistoryEvent``,
``WorkflowTask`` and ``ActivityTask``. Each hop opens its span as a child of the record it read
and stamps what it writes with its own span:

    client  kadence.send StartWorkflow           (the caller's current span is its parent)
      processor  kadence.process StartWorkflow   -> WorkflowTask
        worker  kadence.workflow_task <type>     -> RespondWorkflowTaskCompleted
          processor  kadence.process ...         -> ActivityTask
            worker  kadence.activity <type>      (current while the activity runs: its own
                                                  spans, an HTTP call's, nest under it)

The run's state keeps its start's context, so what no traced command causes (a timer firing, a
timeout) still joins the run's trace. A record with no ``trace_id`` is not traced: nothing is
sampled downstream of a start the client's sampler dropped, and an untraced engine pays one
dictionary look-up per command.

Only the OpenTelemetry API is needed (FastAPI already depends on it). Spans go to the tracer
provider the application set, or the one passed explicitly (``tracer_provider=``, what the tests
do); without one they cost next to nothing and the context still passes through. The ``kadence``
commands set one up from the standard ``OTEL_*`` variables when ``OTEL_TRACES_EXPORTER`` names an
exporter (``configure_from_env``; needs ``pip install 'kadence[tracing]'``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Iterator

from opentelemetry import context as otel_context
from opentelemetry import trace

from .errors import ConfigError

__all__ = ["TraceRef", "Tracer", "FROM_CALLER", "record_ref", "configure_from_env"]

log = logging.getLogger(__name__)

#: (trace_id, span_id) as the records carry them: 32 and 16 lower-case hex digits
TraceRef = tuple[str, str]

#: ``EngineClient.send(trace=...)``'s default: a new span, child of the caller's current span
FROM_CALLER = object()

_KIND = {"producer": trace.SpanKind.PRODUCER, "consumer": trace.SpanKind.CONSUMER,
         "internal": trace.SpanKind.INTERNAL}


def _ref(span: trace.Span) -> TraceRef | None:
    sc = span.get_span_context()
    if not sc.is_valid:
        return None
    return format(sc.trace_id, "032x"), format(sc.span_id, "016x")


def _parent_context(parent: TraceRef) -> otel_context.Context | None:
    """A remote parent built from a record's fields (None if they are not valid hex IDs: a
    record from elsewhere may carry anything, and a bad ID must not fail the command)."""
    try:
        trace_id, span_id = int(parent[0], 16), int(parent[1], 16)
    except (TypeError, ValueError):
        return None
    sc = trace.SpanContext(trace_id=trace_id, span_id=span_id, is_remote=True,
                           trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
    if not sc.is_valid:
        return None
    return trace.set_span_in_context(trace.NonRecordingSpan(sc))


def record_ref(record: dict) -> TraceRef | None:
    """The trace context a decoded record carries, or None."""
    trace_id, span_id = record.get("trace_id"), record.get("span_id")
    if trace_id and span_id:
        return trace_id, span_id
    return None


class Tracer:
    """Kadence's spans for one component (``client``, ``processor``, ``worker``).

    ``provider``: an OpenTelemetry ``TracerProvider``; None uses the global one (the API's proxy
    tracer follows a provider the application sets after making a client)."""

    def __init__(self, component: str, provider: trace.TracerProvider | None = None):
        self.component = component
        self._tracer = provider.get_tracer("kadence") if provider is not None else trace.get_tracer("kadence")

    def send_span(self, name: str, attributes: dict) -> TraceRef | None:
        """A span for a command about to be produced, child of the caller's current span and
        ended at once; its context for the record, or None when it is not sampled."""
        span = self._tracer.start_span(name, kind=trace.SpanKind.PRODUCER, attributes=attributes)
        try:
            if not span.get_span_context().trace_flags.sampled:
                return None
            return _ref(span)
        finally:
            span.end()

    @contextlib.contextmanager
    def child(self, name: str, parent: TraceRef, attributes: dict, *, kind: str = "consumer",
              current: bool = False) -> Iterator[TraceRef]:
        """A span for work caused by a record carrying ``parent``; yields the context to stamp
        on what the work writes. ``current``: the span is the current one inside the block (for
        user code: an activity's own spans nest under it). With no tracer provider the parent's
        context passes through unchanged."""
        ctx = _parent_context(parent)
        if ctx is None:
            yield parent
            return
        span = self._tracer.start_span(name, context=ctx, kind=_KIND[kind], attributes=attributes)
        ref = _ref(span) or parent
        token = otel_context.attach(trace.set_span_in_context(span, ctx)) if current else None
        try:
            yield ref
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(trace.Status(trace.StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            if token is not None:
                otel_context.detach(token)
            span.end()


def configure_from_env(service_name: str, env: dict | None = None) -> trace.TracerProvider | None:
    """Set the global tracer provider from the standard ``OTEL_*`` variables, for a ``kadence``
    command's process; None (nothing set) unless ``OTEL_TRACES_EXPORTER`` names ``otlp`` or
    ``console``. ``OTEL_SERVICE_NAME`` overrides ``service_name``; the OTLP exporter reads
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` and the rest itself.
    Raises ``ConfigError`` for an unknown exporter or a missing ``kadence[tracing]`` extra."""
    env = os.environ if env is None else env
    wanted = [e.strip() for e in env.get("OTEL_TRACES_EXPORTER", "none").split(",") if e.strip()]
    wanted = [e for e in wanted if e != "none"]
    if not wanted or env.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return None
    unknown = [e for e in wanted if e not in ("otlp", "console")]
    if unknown:
        raise ConfigError(f"OTEL_TRACES_EXPORTER names {', '.join(unknown)}: kadence knows otlp and console")
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
        exporters = []
        for name in wanted:
            if name == "otlp":
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
                exporters.append(OTLPSpanExporter())
            else:
                exporters.append(ConsoleSpanExporter())
    except ImportError as exc:
        raise ConfigError(f"OTEL_TRACES_EXPORTER={env['OTEL_TRACES_EXPORTER']} needs the tracing extra: "
                          f"pip install 'kadence[tracing]' ({exc})") from exc
    provider = TracerProvider(resource=Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or service_name}))
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    log.info("tracing: exporting spans (%s) as service %s", ", ".join(wanted),
             env.get("OTEL_SERVICE_NAME") or service_name)
    return provider
