"""An OTLP/HTTP trace receiver on loopback, for tests and benchmarks of tracing: point
``OTEL_EXPORTER_OTLP_ENDPOINT`` at ``collector.endpoint`` and read back what was exported.

    collector = SpanCollector()
    env = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint}
    ...                                    # run kadence processes with env
    spans = collector.spans                # ReceivedSpan records, in arrival order
    collector.close()

It decodes each request with the OTLP protobuf classes (the ``tracing`` extra), so a malformed
export fails loudly (answered 400 and counted in ``bad_requests``). ``keep=False`` only counts.
"""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ReceivedSpan", "SpanCollector"]


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as a collector received it (IDs as integers, as the OpenTelemetry API has them)."""

    name: str
    trace_id: int
    span_id: int
    parent_span_id: int | None
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: tuple[Any, ...]  # ((name, attributes), ...)
    status_code: int
    status_message: str
    service_name: str | None


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


class SpanCollector:
    def __init__(self, *, keep: bool = True) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        self.keep = keep
        self.spans: list[ReceivedSpan] = []
        self.count = self.requests = self.bad_requests = 0
        self.headers: list[dict[str, Any]] = []
        #: answered instead of 200 to the next requests (a test of retries pops from it)
        self.refuse_with: list[int] = []
        self._lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            # keeps connections open, as a collector does: an exporter does not reconnect per batch
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with collector._lock:
                    collector.requests += 1
                    collector.headers.append(dict(self.headers))
                    refuse = collector.refuse_with.pop(0) if collector.refuse_with else None
                if refuse is not None:
                    return self._answer(refuse)
                try:
                    if self.headers.get("Content-Encoding") == "gzip":
                        body = gzip.decompress(body)
                    request = ExportTraceServiceRequest.FromString(body)
                except Exception:  # noqa: BLE001 - a bad request is counted and refused
                    with collector._lock:
                        collector.bad_requests += 1
                    return self._answer(400)
                collector._take(request)
                self._answer(200)

            def _answer(self, status: int) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, name="otlp-collector", daemon=True).start()

    def _take(self, request: Any) -> None:
        received: list[ReceivedSpan | None] = []  # None: a span counted, not kept
        for resource_spans in request.resource_spans:
            resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for s in scope_spans.spans:
                    if not self.keep:
                        received.append(None)
                        continue
                    received.append(
                        ReceivedSpan(
                            name=s.name,
                            trace_id=int.from_bytes(s.trace_id, "big"),
                            span_id=int.from_bytes(s.span_id, "big"),
                            parent_span_id=int.from_bytes(s.parent_span_id, "big") if s.parent_span_id else None,
                            kind=s.kind,
                            start_ns=s.start_time_unix_nano,
                            end_ns=s.end_time_unix_nano,
                            attributes={kv.key: _value(kv.value) for kv in s.attributes},
                            events=tuple((e.name, {kv.key: _value(kv.value) for kv in e.attributes}) for e in s.events),
                            status_code=s.status.code,
                            status_message=s.status.message,
                            service_name=resource.get("service.name"),
                        )
                    )
        with self._lock:
            self.count += len(received)
            if self.keep:
                self.spans.extend(s for s in received if s is not None)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
