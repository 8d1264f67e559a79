"""The engine's own span pipeline (topics/span_export.py, decision 0042): what Kadence's spans
look like once a collector has them, the queue bound, failed and retried exports, and the
exporter's settings read from the OTEL_* variables."""

from __future__ import annotations

import ipaddress
import socket
import socketserver
import ssl
import threading
import time

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from kadence.testing.otlp import SpanCollector
from kadence.topics.errors import ConfigError
from kadence.topics.span_export import OtlpHttpTarget, SpanPipeline, engine_tracer_provider
from kadence.topics.tracing import Tracer

PARENT = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")


@pytest.fixture
def collector():
    c = SpanCollector()
    yield c
    c.close()


def _provider(collector, **env):
    return engine_tracer_provider("kadence-test", {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint, **env})


def test_spans_reach_the_collector_as_a_tree_under_the_callers_span(collector):
    provider = _provider(collector)
    tracer = Tracer("worker", provider)
    try:
        with provider.get_tracer("shop").start_as_current_span("checkout") as checkout:  # an SDK span
            sent = tracer.send_span("kadence.send StartWorkflow", {"kadence.workflow_id": "wf-1"})
        assert sent is not None and sent[0] == format(checkout.get_span_context().trace_id, "032x")
        with tracer.child("kadence.process StartWorkflow", sent, {"kadence.workflow_id": "wf-1"}) as processed:
            pass
        with tracer.child(
            "kadence.activity charge", processed, {"kadence.workflow_id": "wf-1", "kadence.attempt": 2}, current=True
        ) as ran:
            current = trace.get_current_span()
            current.add_event("card charged", {"cents": 250})
            current.set_attribute("shop.card", "visa")
            with provider.get_tracer("shop").start_as_current_span("http POST"):  # the activity's own span
                pass
        assert trace.get_current_span() is not current  # detached after the block
        assert provider.force_flush(10_000)
    finally:
        provider.shutdown()

    by_name = {s.name: s for s in collector.spans}
    assert set(by_name) == {
        "checkout",
        "kadence.send StartWorkflow",
        "kadence.process StartWorkflow",
        "kadence.activity charge",
        "http POST",
    }
    assert {s.trace_id for s in collector.spans} == {checkout.get_span_context().trace_id}
    send, process, act = (
        by_name["kadence.send StartWorkflow"],
        by_name["kadence.process StartWorkflow"],
        by_name["kadence.activity charge"],
    )
    assert send.parent_span_id == checkout.get_span_context().span_id
    assert (send.span_id, process.parent_span_id, act.parent_span_id) == (
        int(sent[1], 16),
        send.span_id,
        process.span_id,
    )
    assert format(process.span_id, "016x") == processed[1] and format(act.span_id, "016x") == ran[1]
    assert by_name["http POST"].parent_span_id == act.span_id  # user spans nest under the activity
    assert (send.kind, process.kind) == (4, 5)  # producer, consumer
    assert act.attributes == {"kadence.workflow_id": "wf-1", "kadence.attempt": 2, "shop.card": "visa"}
    assert act.events == (("card charged", {"cents": 250}),)
    assert act.start_ns <= act.end_ns and act.status_code == 0
    assert {s.service_name for s in collector.spans} == {"kadence-test"}


def test_an_error_ends_the_span_with_its_status_and_is_raised(collector):
    provider = _provider(collector)
    tracer = Tracer("worker", provider)
    try:
        with pytest.raises(KeyError):
            with tracer.child("kadence.workflow_task Order", PARENT, {}):
                raise KeyError("x")
        with pytest.raises(ValueError):
            with tracer.child("kadence.activity charge", PARENT, {}, current=True):
                raise ValueError("card declined")
        assert provider.force_flush(10_000)
    finally:
        provider.shutdown()
    by_name = {s.name: s for s in collector.spans}
    assert (
        by_name["kadence.workflow_task Order"].status_code,
        by_name["kadence.workflow_task Order"].status_message,
    ) == (2, "KeyError")
    activity = by_name["kadence.activity charge"]
    assert activity.status_code == 2
    # the type only: an exception's message may carry a payload's data, and spans leave the engine
    assert activity.events == (("exception", {"exception.type": "ValueError"}),)


@pytest.mark.parametrize(
    "parent", [("zz", "b7ad6b7169203331"), ("0" * 32, "b7ad6b7169203331"), ("0af7651916cd43dd8448eb211c80319c", "1234")]
)
def test_bad_ids_in_a_record_pass_through_without_a_span(collector, parent):
    provider = _provider(collector)
    try:
        with Tracer("processor", provider).child("kadence.process X", parent, {}) as ref:
            assert ref == parent
        assert provider.force_flush(10_000)
    finally:
        provider.shutdown()
    assert collector.spans == []


def test_a_start_the_sampler_drops_carries_no_context_and_records_nothing(collector):
    provider = engine_tracer_provider("t", {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint}, sampler=ALWAYS_OFF)
    try:
        assert Tracer("client", provider).send_span("kadence.send StartWorkflow", {}) is None
        assert provider.force_flush(10_000)
    finally:
        provider.shutdown()
    assert collector.requests == 0 and provider.engine_spans.recorded == 0


def _span(i: int) -> tuple:
    return (bytes(15) + b"\1", i.to_bytes(8, "big"), b"", f"s{i}", 1, 1, 2, (), (), None)


def test_a_full_queue_drops_and_counts_instead_of_blocking(collector, caplog):
    pipeline = SpanPipeline(
        OtlpHttpTarget(endpoint=f"{collector.endpoint}/v1/traces"), {}, max_queue=3, batch=100, delay_s=3600
    )
    try:
        for i in range(1, 6):
            pipeline.record(_span(i))
        assert (pipeline.recorded, pipeline.dropped) == (3, 2)
        full = [r for r in caplog.records if "span queue is full" in r.getMessage()]
        assert len(full) == 1, "one warning a minute, not one per span"
        assert pipeline.flush(10)
    finally:
        pipeline.shutdown()
    assert [s.name for s in collector.spans] == ["s1", "s2", "s3"]


def test_a_full_batch_is_sent_without_waiting_for_the_delay(collector):
    pipeline = SpanPipeline(OtlpHttpTarget(endpoint=f"{collector.endpoint}/v1/traces"), {}, batch=4, delay_s=3600)
    try:
        for i in range(1, 9):
            pipeline.record(_span(i))
        deadline = time.monotonic() + 10  # far below the hour's delay: the full batches woke the sender
        while collector.count < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert collector.count == 8 and collector.requests == 2
    finally:
        pipeline.shutdown()


def test_a_refused_export_is_retried_when_the_spec_says_so_and_dropped_otherwise(collector):
    target = OtlpHttpTarget(endpoint=f"{collector.endpoint}/v1/traces", timeout_s=10)
    pipeline = SpanPipeline(target, {}, delay_s=3600)
    try:
        collector.refuse_with[:] = [503, 429]  # retryable: the third try is taken
        pipeline.record(_span(1))
        assert pipeline.flush(20)
        assert (collector.requests, collector.count, pipeline.exported) == (3, 1, 1)
        collector.refuse_with[:] = [400]  # not retryable: dropped and counted, never raised
        pipeline.record(_span(2))
        assert pipeline.flush(20)
        assert (collector.requests, pipeline.failed_exports, pipeline.dropped) == (4, 1, 1)
    finally:
        pipeline.shutdown()


def test_shutdown_sends_what_is_left(collector):
    pipeline = SpanPipeline(OtlpHttpTarget(endpoint=f"{collector.endpoint}/v1/traces"), {}, delay_s=3600)
    pipeline.record(_span(1))
    pipeline.shutdown()
    assert collector.count == 1


def test_headers_and_gzip_reach_the_collector(collector):
    provider = _provider(
        collector,
        OTEL_EXPORTER_OTLP_HEADERS="api-key=s%3Dcret,x-team=ops",
        OTEL_EXPORTER_OTLP_TRACES_COMPRESSION="gzip",
    )
    try:
        with Tracer("processor", provider).child("kadence.process X", PARENT, {}):
            pass
        assert provider.force_flush(10_000)
    finally:
        provider.shutdown()
    assert [s.name for s in collector.spans] == ["kadence.process X"] and collector.bad_requests == 0
    sent = {k.lower(): v for k, v in collector.headers[0].items()}
    assert sent["api-key"] == "s=cret" and sent["x-team"] == "ops" and sent["content-encoding"] == "gzip"


def test_the_exporter_settings_come_from_the_standard_variables():
    assert OtlpHttpTarget.from_env({}).endpoint == "http://localhost:4318/v1/traces"
    target = OtlpHttpTarget.from_env(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "3",
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "2.5",
            "OTEL_EXPORTER_OTLP_CERTIFICATE": "/etc/ca.pem",
        }
    )
    assert (target.endpoint, target.timeout_s, target.gzip, target.certificate) == (
        "http://collector:4318/v1/traces",
        2.5,
        False,
        "/etc/ca.pem",
    )
    # the signal's own endpoint is used as given
    assert (
        OtlpHttpTarget.from_env(
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b:2/traces"}
        ).endpoint
        == "https://b:2/traces"
    )
    for bad in (
        {"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
        {"OTEL_EXPORTER_OTLP_HEADERS": "novalue"},
        {"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "grpc://x:4317"},
    ):
        with pytest.raises(ConfigError):
            OtlpHttpTarget.from_env(bad)
    with pytest.raises(ConfigError):
        SpanPipeline.from_env({}, {"OTEL_BSP_MAX_QUEUE_SIZE": "0"})


def test_the_test_collector_keeps_the_connection_open_between_exports():
    """A collector keeps connections alive; the bench's must too, or each export pays a connect."""
    import http.client

    collector = SpanCollector(keep=False)
    conn = http.client.HTTPConnection(collector.endpoint.removeprefix("http://"), timeout=5)
    try:
        for _ in range(2):
            conn.request("POST", "/v1/traces", body=b"", headers={"Content-Type": "application/x-protobuf"})
            answer = conn.getresponse()
            answer.read()
            assert answer.status == 200 and not answer.will_close
        assert collector.requests == 2
    finally:
        conn.close()
        collector.close()


class _OneRequestPerConnection(socketserver.ThreadingTCPServer):
    """Answers each connection's first request 200 and closes it without saying so (no
    ``Connection: close``): what a collector does to an idle kept connection."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        self.bodies: list[bytes] = []
        self.connections = 0
        server = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                server.connections += 1
                length = 0
                while (line := self.rfile.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                server.bodies.append(self.rfile.read(length))
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


def test_a_kept_connection_the_collector_closed_is_opened_again_without_losing_spans():
    server = _OneRequestPerConnection()
    # a timeout below the first backoff: only the immediate reconnection can save a batch
    endpoint = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    pipeline = SpanPipeline(OtlpHttpTarget(endpoint=endpoint, timeout_s=0.4), {})
    try:
        for i in range(1, 4):
            pipeline.record(_span(i))
            assert pipeline.flush(10)
    finally:
        pipeline.shutdown()
        server.shutdown()
    assert (pipeline.exported, pipeline.failed_exports, server.connections) == (3, 0, 3)
    names = [s.name for body in server.bodies for s in _decoded_spans(body)]
    assert names == ["s1", "s2", "s3"]


def _decoded_spans(body: bytes):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest.FromString(body)
    return [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]


def test_no_collector_drops_the_batch_after_the_timeout_and_counts_it(caplog):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pipeline = SpanPipeline(OtlpHttpTarget(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout_s=1), {})
    try:
        pipeline.record(_span(1))
        assert pipeline.flush(10)
    finally:
        pipeline.shutdown()
    assert (pipeline.exported, pipeline.failed_exports, pipeline.dropped) == (0, 1, 1)
    assert any("ConnectionRefusedError" in r.getMessage() for r in caplog.records)


def _self_signed(tmp_path):
    """A certificate for 127.0.0.1 and its key, as PEM files."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kadence test collector")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "collector.pem", tmp_path / "collector.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


def test_https_posts_verify_the_collector_against_the_configured_certificate(collector, tmp_path, caplog):
    cert_file, key_file = _self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    collector._server.socket = context.wrap_socket(collector._server.socket, server_side=True)
    endpoint = collector.endpoint.replace("http://", "https://") + "/v1/traces"
    trusted = SpanPipeline(OtlpHttpTarget(endpoint=endpoint, certificate=str(cert_file)), {})
    untrusted = SpanPipeline(OtlpHttpTarget(endpoint=endpoint, timeout_s=1), {})  # the system's CAs only
    try:
        trusted.record(_span(1))
        untrusted.record(_span(2))
        assert trusted.flush(10) and untrusted.flush(10)
    finally:
        trusted.shutdown()
        untrusted.shutdown()
    assert [s.name for s in collector.spans] == ["s1"]
    assert (trusted.exported, untrusted.exported, untrusted.failed_exports) == (1, 0, 1)
    assert any("CERTIFICATE_VERIFY_FAILED" in r.getMessage() for r in caplog.records)
