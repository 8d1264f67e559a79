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
import enum
import logging
import os
import random
import time
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from opentelemetry import context as otel_context
from opentelemetry import trace

from . import span_export
from .errors import ConfigError

__all__ = [
    "FROM_CALLER",
    "EngineSpan",
    "FromCaller",
    "TraceRef",
    "Tracer",
    "configure_from_env",
    "provider_from_env",
    "record_ref",
]

log = logging.getLogger(__name__)

#: (trace_id, span_id) as the records carry them: 32 and 16 lower-case hex digits
TraceRef = tuple[str, str]


#: ``EngineClient.send(trace=...)``'s default: a new span, child of the caller's current span
class _FromCaller(enum.Enum):
    FROM_CALLER = "from caller"


FROM_CALLER = _FromCaller.FROM_CALLER
#: the type of ``FROM_CALLER``, for a parameter that defaults to it
FromCaller = Literal[_FromCaller.FROM_CALLER]

_KIND = {"producer": trace.SpanKind.PRODUCER, "consumer": trace.SpanKind.CONSUMER, "internal": trace.SpanKind.INTERNAL}


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
    sc = trace.SpanContext(
        trace_id=trace_id, span_id=span_id, is_remote=True, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED)
    )
    if not sc.is_valid:
        return None
    return trace.set_span_in_context(trace.NonRecordingSpan(sc))


def record_ref(record: Mapping[str, Any]) -> TraceRef | None:
    """The trace context a decoded record carries, or None."""
    trace_id, span_id = record.get("trace_id"), record.get("span_id")
    if trace_id and span_id:
        return trace_id, span_id
    return None


class Tracer:
    """Kadence's spans for one component (``client``, ``processor``, ``worker``).

    ``provider``: an OpenTelemetry ``TracerProvider``; None uses the global one (the API's proxy
    tracer follows a provider the application sets after making a client). A provider made by
    ``provider_from_env`` or ``span_export.engine_tracer_provider`` carries the engine's own span
    pipeline (``engine_spans``): Kadence's spans then go there, about seven times cheaper than
    through the SDK (decision 0042), and the SDK is left to the application's spans. That
    pipeline is found when the tracer is made: one set globally later gets the SDK path.

    An exception that ends a span is recorded as an ``exception`` event with its type only: its
    message may hold a payload's data, and spans leave the engine (the history keeps it)."""

    def __init__(self, component: str, provider: trace.TracerProvider | None = None) -> None:
        self.component = component
        resolved = provider if provider is not None else trace.get_tracer_provider()
        self._spans = getattr(resolved, "engine_spans", None)
        self._sampler = getattr(resolved, "sampler", None)
        self._tracer = provider.get_tracer("kadence") if provider is not None else trace.get_tracer("kadence")

    def send_span(self, name: str, attributes: dict[str, Any]) -> TraceRef | None:
        """A span for a command about to be produced, child of the caller's current span and
        ended at once; its context for the record, or None when it is not sampled."""
        if self._spans is not None:
            return self._send_span_fast(name, attributes)
        span = self._tracer.start_span(name, kind=trace.SpanKind.PRODUCER, attributes=attributes)
        try:
            if not span.get_span_context().trace_flags.sampled:
                return None
            return _ref(span)
        finally:
            span.end()

    def _send_span_fast(self, name: str, attributes: dict[str, Any]) -> TraceRef | None:
        parent = trace.get_current_span().get_span_context()
        if parent.is_valid:
            trace_id, parent_id = parent.trace_id, parent.span_id.to_bytes(8, "big")
        else:
            trace_id, parent_id = _random_trace_id(), b""
        sampler, spans = self._sampler, self._spans
        assert sampler is not None and spans is not None, "the engine's provider has both"
        decision = sampler.should_sample(
            otel_context.get_current(), trace_id, name, trace.SpanKind.PRODUCER, attributes
        )
        if not decision.decision.is_sampled():
            return None
        span_id = _random_span_id()
        now = time.time_ns()
        spans.record(
            (
                trace_id.to_bytes(16, "big"),
                span_id.to_bytes(8, "big"),
                parent_id,
                name,
                span_export.KIND_PRODUCER,
                now,
                now,
                tuple(attributes.items()),
                (),
                None,
            )
        )
        return format(trace_id, "032x"), format(span_id, "016x")

    def child(
        self, name: str, parent: TraceRef, attributes: dict[str, Any], *, kind: str = "consumer", current: bool = False
    ) -> contextlib.AbstractContextManager[TraceRef]:
        """A span for work caused by a record carrying ``parent``; as a context manager, gives
        the context to stamp on what the work writes. ``current``: the span is the current one
        inside the block (for user code: an activity's own spans nest under it). With no tracer
        provider the parent's context passes through unchanged."""
        if self._spans is not None:
            return self._child_fast(name, parent, attributes, kind, current)
        return self._child_sdk(name, parent, attributes, kind, current)

    @contextlib.contextmanager
    def _child_sdk(
        self, name: str, parent: TraceRef, attributes: dict[str, Any], kind: str, current: bool
    ) -> Iterator[TraceRef]:
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
            _end_with(span, exc)
            raise
        finally:
            if token is not None:
                otel_context.detach(token)
            span.end()

    def _child_fast(
        self, name: str, parent: TraceRef, attributes: dict[str, Any], kind: str, current: bool
    ) -> contextlib.AbstractContextManager[TraceRef]:
        spans = self._spans
        assert spans is not None, "only with the engine's provider"
        try:
            trace_id, parent_id = bytes.fromhex(parent[0]), bytes.fromhex(parent[1])
        except (TypeError, ValueError):
            trace_id = parent_id = b""
        if len(trace_id) != 16 or len(parent_id) != 8 or not any(trace_id) or not any(parent_id):
            # a record from elsewhere may carry anything: a bad ID must not fail the command
            return contextlib.nullcontext(parent)
        if current:  # user code runs inside: a span it can annotate, and nest its own spans under
            return self._current_span(spans, name, parent, attributes, kind, trace_id, parent_id)
        return _ChildSpan(spans, name, parent[0], _SPAN_KIND[kind], trace_id, parent_id, attributes)

    @contextlib.contextmanager
    def _current_span(
        self,
        spans: span_export.SpanPipeline,
        name: str,
        parent: TraceRef,
        attributes: dict[str, Any],
        kind: str,
        trace_id: bytes,
        parent_id: bytes,
    ) -> Iterator[TraceRef]:
        span_id = _random_span_id()
        span = EngineSpan(spans, name, _SPAN_KIND[kind], trace_id, span_id, parent_id, attributes)
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            yield parent[0], format(span_id, "016x")
        except BaseException as exc:
            _end_with(span, exc)
            raise
        finally:
            otel_context.detach(token)
            span.end()


class _ChildSpan:
    """The engine's pipeline's span for one hop (the processor's command, the worker's workflow
    task): a context manager that gives the context to stamp and records the span when the
    block ends. A class, not a generator: the processor opens one per command (0.6 µs less)."""

    __slots__ = ("_attributes", "_kind", "_name", "_parent_id", "_span_id", "_spans", "_start", "_trace_id", "ref")

    def __init__(
        self,
        spans: span_export.SpanPipeline,
        name: str,
        trace_hex: str,
        kind: int,
        trace_id: bytes,
        parent_id: bytes,
        attributes: dict[str, Any],
    ) -> None:
        span_id = _random_span_id()
        self._spans, self._name, self._kind, self._attributes = spans, name, kind, attributes
        self._trace_id, self._parent_id, self._span_id = trace_id, parent_id, span_id.to_bytes(8, "big")
        self.ref: TraceRef = (trace_hex, format(span_id, "016x"))
        self._start = 0

    def __enter__(self) -> TraceRef:
        self._start = time.time_ns()
        return self.ref

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        status = None if exc_type is None else (span_export.STATUS_ERROR, exc_type.__name__)
        self._spans.record(
            (
                self._trace_id,
                self._span_id,
                self._parent_id,
                self._name,
                self._kind,
                self._start,
                time.time_ns(),
                tuple(self._attributes.items()),
                (),
                status,
            )
        )


def _end_with(span: trace.Span, exc: BaseException) -> None:
    """The error that ends an engine span: its type, never its message (see ``Tracer``)."""
    span.add_event("exception", {"exception.type": type(exc).__name__})
    span.set_status(trace.Status(trace.StatusCode.ERROR, type(exc).__name__))


_SPAN_KIND = {
    "producer": span_export.KIND_PRODUCER,
    "consumer": span_export.KIND_CONSUMER,
    "internal": span_export.KIND_INTERNAL,
}


def _random_span_id() -> int:
    while True:
        span_id = random.getrandbits(64)
        if span_id:
            return span_id


def _random_trace_id() -> int:
    while True:
        trace_id = random.getrandbits(128)
        if trace_id:
            return trace_id


def _plain(value: object) -> str | bool | int | float:
    """An attribute value OTLP can carry as a scalar (sequences are written as their text)."""
    return value if isinstance(value, (str, bool, int, float)) else str(value)


class EngineSpan(trace.Span):
    """A span of the engine's pipeline that user code can see as the current span (an
    activity's): attributes, events, status and exceptions are recorded; links are not."""

    def __init__(
        self,
        spans: span_export.SpanPipeline,
        name: str,
        kind: int,
        trace_id: bytes,
        span_id: int,
        parent_id: bytes,
        attributes: dict[str, Any],
    ) -> None:
        self._spans, self._name, self._kind = spans, name, kind
        self._trace_id, self._span_id, self._parent_id = trace_id, span_id, parent_id
        self._context = trace.SpanContext(
            int.from_bytes(trace_id, "big"),
            span_id,
            is_remote=False,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
        )
        self._attributes = dict(attributes)
        self._events: list[Any] = []
        self._status: tuple[int, str] | None = None
        self._start = time.time_ns()
        self._ended = False

    def end(self, end_time: int | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        self._spans.record(
            (
                self._trace_id,
                self._span_id.to_bytes(8, "big"),
                self._parent_id,
                self._name,
                self._kind,
                self._start,
                end_time or time.time_ns(),
                tuple(self._attributes.items()),
                tuple(self._events),
                self._status,
            )
        )

    def get_span_context(self) -> trace.SpanContext:
        return self._context

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        for key, value in attributes.items():
            self.set_attribute(key, value)

    def set_attribute(self, key: str, value: Any) -> None:
        if not self._ended and value is not None:
            self._attributes[key] = _plain(value)

    def add_event(self, name: str, attributes: Mapping[str, Any] | None = None, timestamp: int | None = None) -> None:
        if not self._ended:
            self._events.append(
                (name, timestamp or time.time_ns(), tuple((k, _plain(v)) for k, v in (attributes or {}).items()))
            )

    def add_link(self, context: trace.SpanContext, attributes: Mapping[str, Any] | None = None) -> None:
        pass  # the engine's spans carry no links; documented in docs/tracing.md

    def update_name(self, name: str) -> None:
        if not self._ended:
            self._name = name

    def is_recording(self) -> bool:
        return not self._ended

    def set_status(self, status: trace.Status | trace.StatusCode, description: str | None = None) -> None:
        if self._ended:
            return
        if isinstance(status, trace.Status):
            code, description = status.status_code, status.description
        else:
            code = status
        if code is trace.StatusCode.ERROR:
            self._status = (span_export.STATUS_ERROR, description or "")
        elif code is trace.StatusCode.OK:
            self._status = (span_export.STATUS_OK, "")

    def record_exception(
        self,
        exception: BaseException,
        attributes: Mapping[str, Any] | None = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        self.add_event(
            "exception",
            {"exception.type": type(exception).__name__, "exception.message": str(exception), **(attributes or {})},
            timestamp,
        )


def configure_from_env(service_name: str, env: Mapping[str, str] | None = None) -> trace.TracerProvider | None:
    """Set the global tracer provider from the standard ``OTEL_*`` variables, for a ``kadence``
    command's process (``provider_from_env``); returns it, or None when tracing is off."""
    env = os.environ if env is None else env
    provider = provider_from_env(service_name, env)
    if provider is not None:
        trace.set_tracer_provider(provider)
        log.info(
            "tracing: exporting spans (%s) as service %s",
            env.get("OTEL_TRACES_EXPORTER"),
            env.get("OTEL_SERVICE_NAME") or service_name,
        )
    return provider


def provider_from_env(service_name: str, env: Mapping[str, str] | None = None) -> trace.TracerProvider | None:
    """A tracer provider from the standard ``OTEL_*`` variables; None (tracing off) unless
    ``OTEL_TRACES_EXPORTER`` names ``otlp`` or ``console``. ``OTEL_SERVICE_NAME`` overrides
    ``service_name``; the OTLP exporter reads ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` and the rest. With ``otlp`` alone, Kadence's own spans
    take the engine's pipeline (``span_export``) and the SDK keeps the application's;
    ``KADENCE_ENGINE_SPANS=sdk`` sends them through the SDK too. Raises ``ConfigError`` for an
    unknown exporter or a missing ``kadence[tracing]`` extra."""
    env = os.environ if env is None else env
    wanted = [e.strip() for e in env.get("OTEL_TRACES_EXPORTER", "none").split(",") if e.strip()]
    wanted = [e for e in wanted if e != "none"]
    if not wanted or env.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return None
    unknown = [e for e in wanted if e not in ("otlp", "console")]
    if unknown:
        raise ConfigError(f"OTEL_TRACES_EXPORTER names {', '.join(unknown)}: kadence knows otlp and console")
    try:
        engine_spans = env.get("KADENCE_ENGINE_SPANS", "kadence").strip().lower()
        if engine_spans not in ("kadence", "sdk"):
            raise ConfigError(f"KADENCE_ENGINE_SPANS={engine_spans}: kadence (the engine's own pipeline) or sdk")
        if wanted == ["otlp"] and engine_spans == "kadence":  # the engine's own pipeline (decision 0042)
            from .span_export import engine_tracer_provider

            provider = engine_tracer_provider(service_name, env)
        else:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

            exporters: list[SpanExporter] = []
            for name in wanted:
                if name == "otlp":
                    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

                    exporters.append(OTLPSpanExporter())
                else:
                    exporters.append(ConsoleSpanExporter())
            provider = TracerProvider(
                resource=Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or service_name})
            )
            for exporter in exporters:
                provider.add_span_processor(BatchSpanProcessor(exporter))
    except ImportError as exc:
        raise ConfigError(
            f"OTEL_TRACES_EXPORTER={env['OTEL_TRACES_EXPORTER']} needs the tracing extra: "
            f"pip install 'kadence[tracing]' ({exc})"
        ) from exc
    return provider
