"""The engine's own span pipeline: Kadence's spans recorded as tuples, batched on a thread,
encoded with the OTLP protobuf classes (``opentelemetry-proto``) and posted over OTLP/HTTP.

Why not the OpenTelemetry SDK for these spans (decision 0042): on this project's 2-core machine
the SDK spends about 170 µs of CPU per span (creating it, queueing it, encoding it), and a
3-activity workflow makes about 15 spans, so tracing every run cost a third of the throughput at
saturation. Recording a tuple and encoding it here costs about a tenth of that. The SDK stays
where the application's code runs: its own spans, the sampler, the resource (``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``), and the console exporter.

What this module keeps from the SDK's pipeline, and how:

- a bounded queue (``OTEL_BSP_MAX_QUEUE_SIZE``, default 2048): a span that finds it full is
  dropped and counted (a warning at most once a minute), never blocks the engine;
- batches of ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` (512), sent every ``OTEL_BSP_SCHEDULE_DELAY`` ms
  (5000) or as soon as a batch is full, on one daemon thread; ``shutdown()`` sends what is left;
- the OTLP/HTTP exporter's settings, read from the same variables: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
  (used as given) or ``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces`` (default
  ``http://localhost:4318``), ``..._HEADERS`` (``k=v,k2=v2``, URL-encoded values), ``..._TIMEOUT``
  (seconds, as the Python exporter reads it; default 10), ``..._COMPRESSION`` (``gzip`` or
  ``none``) and ``..._CERTIFICATE`` (a CA bundle for https); the signal-specific variable wins;
- retries of a refused export (429, 502, 503, 504, or no connection) with backoff within the
  timeout, as the spec asks; a batch that still fails is dropped, counted and logged once a minute.
"""

from __future__ import annotations

import gzip
import logging
import math
import os
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import ConfigError

if TYPE_CHECKING:  # optional: the tracing extra
    import requests
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import Sampler

__all__ = [
    "KIND_CONSUMER",
    "KIND_INTERNAL",
    "KIND_PRODUCER",
    "STATUS_ERROR",
    "STATUS_OK",
    "OtlpHttpTarget",
    "SpanPipeline",
    "SpanTuple",
]

log = logging.getLogger(__name__)

# OTLP's Span.SpanKind numbers
KIND_INTERNAL, KIND_PRODUCER, KIND_CONSUMER = 1, 4, 5
# and Status.StatusCode's
STATUS_OK, STATUS_ERROR = 1, 2

#: (trace_id 16 bytes, span_id 8 bytes, parent span_id 8 bytes or b"", name, kind, start ns, end ns,
#:  attributes ((key, value), ...) with str/int/bool/float values, events ((name, time ns, attributes), ...),
#:  status: None (unset) or (code, description) with OTLP's codes, 1 ok and 2 error)
SpanTuple = tuple[Any, ...]

_RETRYABLE = {429, 502, 503, 504}


def _env(env: Mapping[str, str], name: str) -> str | None:
    """The traces-specific variable, else the general one (``OTEL_EXPORTER_OTLP_{TRACES_}name``)."""
    return env.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}") or env.get(f"OTEL_EXPORTER_OTLP_{name}") or None


def _parse_headers(text: str) -> dict[str, str]:
    headers = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"OTEL_EXPORTER_OTLP_HEADERS: {item.strip()!r} is not key=value")
        headers[urllib.parse.unquote(key.strip()).lower()] = urllib.parse.unquote(value.strip())
    return headers


@dataclass(frozen=True)
class OtlpHttpTarget:
    """Where and how spans are posted (OTLP/HTTP, protobuf body)."""

    endpoint: str = "http://localhost:4318/v1/traces"
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 10.0
    gzip: bool = False
    certificate: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> OtlpHttpTarget:
        env = os.environ if env is None else env
        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        if not endpoint:
            base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "http://localhost:4318"
            endpoint = base.rstrip("/") + "/v1/traces"
        if not endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"OTLP endpoint {endpoint!r}: kadence exports over OTLP/HTTP, give an http(s) URL")
        compression = (_env(env, "COMPRESSION") or "none").strip().lower()
        if compression not in ("gzip", "none"):
            raise ConfigError(f"OTEL_EXPORTER_OTLP_COMPRESSION={compression}: kadence knows gzip and none")
        timeout = _env(env, "TIMEOUT")
        try:
            timeout_s = float(timeout) if timeout else 10.0
        except ValueError:
            raise ConfigError(f"OTEL_EXPORTER_OTLP_TIMEOUT={timeout!r} is not a number of seconds") from None
        return cls(
            endpoint=endpoint,
            headers=_parse_headers(_env(env, "HEADERS") or ""),
            timeout_s=timeout_s,
            gzip=compression == "gzip",
            certificate=_env(env, "CERTIFICATE"),
        )

    def post(self, session: requests.Session, body: bytes) -> None:
        """Send one request on a ``requests.Session``; retries what the spec calls retryable
        until the timeout is spent. Raises ``OSError`` (with the reason) when the collector did
        not take it."""
        import requests  # with the tracing extra (the OTLP exporter's own dependency)

        headers = {"Content-Type": "application/x-protobuf", **self.headers}
        if self.gzip:
            body = gzip.compress(body, compresslevel=6)
            headers["Content-Encoding"] = "gzip"
        deadline = time.monotonic() + self.timeout_s
        backoff = 0.5
        while True:
            left = deadline - time.monotonic()
            try:
                reply = session.post(
                    self.endpoint, data=body, headers=headers, timeout=max(left, 0.1), verify=self.certificate or True
                )
            except requests.RequestException as exc:
                status, reason = None, f"{type(exc).__name__}: {exc}"
            else:
                if reply.status_code < 300:
                    return
                status, reason = reply.status_code, f"HTTP {reply.status_code}"
            if (status is not None and status not in _RETRYABLE) or time.monotonic() + backoff > deadline:
                raise OSError(f"OTLP export to {self.endpoint} failed: {reason}")
            time.sleep(backoff)
            backoff *= 2


def _int_env(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    try:
        value = int(raw) if raw else default
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer") from None
    if value <= 0:
        raise ConfigError(f"{name}={raw!r} must be positive")
    return value


class SpanPipeline:
    """Spans in, OTLP requests out. ``record`` is what the engine calls on its hot path: it
    appends a tuple to a deque (thread-safe in CPython), and wakes the sender only when a batch
    is full. ``resource``: the attributes of the process (``service.name`` ...), as the SDK's
    ``Resource.create`` resolved them."""

    def __init__(
        self,
        target: OtlpHttpTarget,
        resource: Mapping[str, object],
        *,
        max_queue: int = 2048,
        batch: int = 512,
        delay_s: float = 5.0,
        scope: str = "kadence",
    ) -> None:
        # the protobuf classes come with the tracing extra, as the SDK does
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
        from opentelemetry.proto.common.v1 import common_pb2
        from opentelemetry.proto.resource.v1 import resource_pb2

        self._pb_request = trace_service_pb2.ExportTraceServiceRequest
        self._pb_resource = resource_pb2.Resource(
            attributes=[_key_value(common_pb2, k, v) for k, v in resource.items()]
        )
        self._pb_scope = common_pb2.InstrumentationScope(name=scope)
        self._common = common_pb2
        self.target = target
        self.max_queue, self.batch, self.delay_s = max_queue, batch, delay_s
        self._queue: deque[SpanTuple] = deque()
        self._wake = threading.Event()
        self._stopping = False
        self._idle = threading.Condition()
        self._sending = 0
        self.recorded = self.exported = self.dropped = self.failed_exports = 0
        self._last_failure_log = self._last_full_log = -math.inf
        import requests

        self._session = requests.Session()
        self._thread = threading.Thread(target=self._run, name="kadence-span-export", daemon=True)
        self._thread.start()

    @classmethod
    def from_env(cls, resource: Mapping[str, object], env: Mapping[str, str] | None = None) -> SpanPipeline:
        env = os.environ if env is None else env
        return cls(
            OtlpHttpTarget.from_env(env),
            resource,
            max_queue=_int_env(env, "OTEL_BSP_MAX_QUEUE_SIZE", 2048),
            batch=_int_env(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512),
            delay_s=_int_env(env, "OTEL_BSP_SCHEDULE_DELAY", 5000) / 1000,
        )

    def record(self, span: SpanTuple) -> None:
        queue = self._queue
        if len(queue) >= self.max_queue:
            self.dropped += 1
            now = time.monotonic()
            if now - self._last_full_log > 60:
                self._last_full_log = now
                log.warning(
                    "tracing: the span queue is full (%d, OTEL_BSP_MAX_QUEUE_SIZE): spans are dropped "
                    "(%d so far); the collector is slow or away",
                    self.max_queue,
                    self.dropped,
                )
            return
        queue.append(span)
        self.recorded += 1
        if len(queue) == self.batch:
            self._wake.set()

    # -- the sender thread --------------------------------------------------------------------

    def encode(self, spans: list[SpanTuple]) -> bytes:
        """One ``ExportTraceServiceRequest`` holding ``spans`` (public for the tests and the bench)."""
        common = self._common
        request = self._pb_request()
        resource_spans = request.resource_spans.add()
        resource_spans.resource.CopyFrom(self._pb_resource)
        scope_spans = resource_spans.scope_spans.add()
        scope_spans.scope.CopyFrom(self._pb_scope)
        out = scope_spans.spans
        for trace_id, span_id, parent, name, kind, start, end, attributes, events, status in spans:
            s = out.add(
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=parent,
                name=name,
                kind=kind,
                start_time_unix_nano=start,
                end_time_unix_nano=end,
                attributes=[_key_value(common, k, v) for k, v in attributes],
            )
            for event_name, at, event_attributes in events:
                s.events.add(
                    name=event_name,
                    time_unix_nano=at,
                    attributes=[_key_value(common, k, v) for k, v in event_attributes],
                )
            if status is not None:
                s.status.code, s.status.message = status
        encoded: bytes = request.SerializeToString()
        return encoded

    def _take(self) -> list[SpanTuple]:
        queue = self._queue
        spans: list[SpanTuple] = []
        while queue and len(spans) < self.batch:
            spans.append(queue.popleft())
        return spans

    def _send(self, spans: list[SpanTuple]) -> None:
        try:
            self.target.post(self._session, self.encode(spans))
            self.exported += len(spans)
        except Exception as exc:  # noqa: BLE001 - an exporter never fails the engine; counted and logged
            self.failed_exports += 1
            self.dropped += len(spans)
            now = time.monotonic()
            if now - self._last_failure_log > 60:
                self._last_failure_log = now
                log.warning("tracing: %d spans dropped: %s", len(spans), exc)

    def _run(self) -> None:
        while True:
            self._wake.wait(self.delay_s)
            self._wake.clear()
            while True:
                with self._idle:
                    spans = self._take()
                    self._sending = len(spans)
                if not spans:
                    break
                self._send(spans)
                with self._idle:
                    self._sending = 0
                    self._idle.notify_all()
                if len(self._queue) < self.batch and not self._stopping:
                    break
            if self._stopping and not self._queue:
                with self._idle:
                    self._idle.notify_all()
                return

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Send everything recorded so far; True when it went (or was dropped) within the timeout."""
        deadline = time.monotonic() + timeout_s
        self._wake.set()
        with self._idle:
            while self._queue or self._sending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._wake.set()
                self._idle.wait(min(left, 0.05))
        return True

    def shutdown(self, timeout_s: float = 30.0) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout_s)
        self._session.close()


def _key_value(common: Any, key: str, value: object) -> Any:  # common: the OTLP protobuf module
    if isinstance(value, bool):
        any_value = common.AnyValue(bool_value=value)
    elif isinstance(value, int):
        any_value = common.AnyValue(int_value=value)
    elif isinstance(value, float):
        any_value = common.AnyValue(double_value=value)
    else:
        any_value = common.AnyValue(string_value=str(value))
    return common.KeyValue(key=key, value=any_value)


def engine_tracer_provider(
    service_name: str, env: Mapping[str, str] | None = None, *, sampler: Sampler | None = None
) -> TracerProvider:
    """An OpenTelemetry SDK ``TracerProvider`` for the application's spans (exported through the
    SDK's batch processor and OTLP/HTTP exporter, configured by the same variables), carrying a
    ``SpanPipeline`` as ``engine_spans`` that Kadence's own spans take instead (``topics.tracing.Tracer``
    looks for it). Both share the resource and the sampler; ``shutdown()`` flushes both.
    ``sampler``: the SDK's (default: from ``OTEL_TRACES_SAMPLER``)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    env = os.environ if env is None else env

    class EngineTracerProvider(TracerProvider):
        #: the pipeline Kadence's own spans take (set once, right after the provider is made)
        engine_spans: SpanPipeline

        def shutdown(self) -> None:
            self.engine_spans.shutdown()
            super().shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return self.engine_spans.flush(timeout_millis / 1000) and super().force_flush(timeout_millis)

    resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or service_name})
    provider = EngineTracerProvider(resource=resource, sampler=sampler)
    provider.engine_spans = SpanPipeline.from_env(dict(resource.attributes), env)
    target = provider.engine_spans.target
    provider.add_span_processor(
        BatchSpanProcessor(
            OTLPSpanExporter(
                endpoint=target.endpoint,
                certificate_file=target.certificate,
                headers=dict(target.headers),
                timeout=target.timeout_s,
                compression=None,
            )
        )
    )
    return provider
