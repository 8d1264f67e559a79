"""The engine's own span pipeline: Kadence's spans encoded as OTLP protobuf when they end
(``otlp_encoding``, by hand: decision 0049), batched on a thread and posted over OTLP/HTTP.

Why not the OpenTelemetry SDK for these spans (decision 0042): on this project's 2-core machine
the SDK spends about 170 µs of CPU per span (creating it, queueing it, encoding it), and a
3-activity workflow makes about 15 spans, so tracing every run cost a third of the throughput at
saturation. Encoding a span here costs about a twentieth of that (decision 0049). The SDK stays
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

The export thread does little with the GIL (joining bytes, one ``http.client`` request on a kept
connection): what it held while the engine's main thread waited for it was the larger part of
this pipeline's cost to the engine (decision 0049).
"""

from __future__ import annotations

import gzip
import http.client
import logging
import math
import os
import ssl
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import otlp_encoding
from .errors import ConfigError

if TYPE_CHECKING:  # optional: the tracing extra
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import Sampler

__all__ = [
    "KIND_CONSUMER",
    "KIND_INTERNAL",
    "KIND_PRODUCER",
    "STATUS_ERROR",
    "STATUS_OK",
    "OtlpConnection",
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

    def connect(self) -> OtlpConnection:
        """A connection to post requests on (opened at the first request, then kept open)."""
        return OtlpConnection(self)


class OtlpConnection:
    """One kept-open HTTP(S) connection to an ``OtlpHttpTarget``: ``post`` sends a request and
    retries what the spec calls retryable until the target's timeout is spent.

    ``http.client`` rather than ``requests`` (the SDK exporter's client): posting a 40 kB body
    cost 740 µs of CPU through a ``requests.Session`` and 210 µs through ``http.client``, the
    collector's side included (decision 0049), and the export thread holds the GIL meanwhile."""

    def __init__(self, target: OtlpHttpTarget) -> None:
        self.target = target
        url = urllib.parse.urlsplit(target.endpoint)
        self._https = url.scheme == "https"
        self._host, self._port = url.hostname or "localhost", url.port
        self._path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        self._conn: http.client.HTTPConnection | None = None

    def _open(self, timeout_s: float) -> http.client.HTTPConnection:
        if self._https:
            context = ssl.create_default_context(cafile=self.target.certificate)
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout_s, context=context)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout_s)

    def _post_once(self, body: bytes, headers: dict[str, str], timeout_s: float) -> int:
        """One request; its status. A kept connection that the collector closed meanwhile is
        opened again once, at once (as a pooled client does); other errors raise ``OSError``."""
        while True:
            conn, reused = self._conn, self._conn is not None
            if conn is None:
                conn = self._conn = self._open(timeout_s)
            elif conn.sock is not None:
                conn.sock.settimeout(timeout_s)
            try:
                conn.request("POST", self._path, body=body, headers=headers)
                reply = conn.getresponse()
                reply.read()
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                stale = isinstance(exc, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError))
                if reused and stale:
                    continue  # the next try opens a new connection: it cannot be reused twice
                raise OSError(f"{type(exc).__name__}: {exc}") from exc
            if reply.will_close:
                self.close()
            return reply.status

    def post(self, body: bytes) -> None:
        """Send one request. Raises ``OSError`` (with the reason) when the collector did not
        take it within the target's timeout."""
        target = self.target
        headers = {"Content-Type": "application/x-protobuf", **target.headers}
        if target.gzip:
            body = gzip.compress(body, compresslevel=6)
            headers["Content-Encoding"] = "gzip"
        deadline = time.monotonic() + target.timeout_s
        backoff = 0.5
        while True:
            left = deadline - time.monotonic()
            status: int | None
            try:
                status = self._post_once(body, headers, max(left, 0.1))
            except OSError as exc:
                status, reason = None, str(exc)
            else:
                if status < 300:
                    return
                reason = f"HTTP {status}"
            if (status is not None and status not in _RETRYABLE) or time.monotonic() + backoff > deadline:
                raise OSError(f"OTLP export to {target.endpoint} failed: {reason}")
            time.sleep(backoff)
            backoff *= 2

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


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
    encodes the span (``otlp_encoding.encode_span``), appends its bytes to a deque (thread-safe
    in CPython), and wakes the sender only when a batch is full. ``resource``: the attributes of
    the process (``service.name`` ...), as the SDK's ``Resource.create`` resolved them."""

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
        self._resource = dict(resource)
        self._scope = scope
        self.target = target
        self.max_queue, self.batch, self.delay_s = max_queue, batch, delay_s
        self._queue: deque[bytes] = deque()  # encoded spans
        self._wake = threading.Event()
        self._stopping = False
        self._idle = threading.Condition()
        self._sending = 0
        self.recorded = self.exported = self.dropped = self.failed_exports = 0
        self._last_failure_log = self._last_full_log = -math.inf
        self._connection = target.connect()
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
        queue.append(otlp_encoding.encode_span(span))
        self.recorded += 1
        if len(queue) == self.batch:
            self._wake.set()

    # -- the sender thread --------------------------------------------------------------------

    def _take(self) -> list[bytes]:
        queue = self._queue
        spans: list[bytes] = []
        while queue and len(spans) < self.batch:
            spans.append(queue.popleft())
        return spans

    def _send(self, spans: list[bytes]) -> None:
        try:
            self._connection.post(otlp_encoding.request(self._resource, self._scope, spans))
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
        self._connection.close()


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
