"""The hand-written OTLP encoding of the engine's spans (topics/otlp_encoding.py, decision 0049)
against the opentelemetry-proto classes: the same bytes for what the engine writes, and the same
message once decoded for every value the encoder takes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from kadence.topics import otlp_encoding

RESOURCE = {"service.name": "kadence-processor", "telemetry.sdk.language": "python", "pid": 4242}


def _key_value(key, value):
    if isinstance(value, bool):
        any_value = common_pb2.AnyValue(bool_value=value)
    elif isinstance(value, int):
        any_value = common_pb2.AnyValue(int_value=value)
    elif isinstance(value, float):
        any_value = common_pb2.AnyValue(double_value=value)
    else:
        any_value = common_pb2.AnyValue(string_value=str(value))
    return common_pb2.KeyValue(key=key, value=any_value)


def _reference_span(span) -> trace_pb2.Span:
    """What the pipeline built with the protobuf classes before decision 0049."""
    trace_id, span_id, parent, name, kind, start, end, attributes, events, status = span
    s = trace_pb2.Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        kind=kind,
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        attributes=[_key_value(k, v) for k, v in attributes],
    )
    for event_name, at, event_attributes in events:
        s.events.add(name=event_name, time_unix_nano=at, attributes=[_key_value(k, v) for k, v in event_attributes])
    if status is not None:
        s.status.code, s.status.message = status
    return s


def _reference_request(resource, scope, spans) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.CopyFrom(resource_pb2.Resource(attributes=[_key_value(k, v) for k, v in resource.items()]))
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.CopyFrom(common_pb2.InstrumentationScope(name=scope))
    for span in spans:
        scope_spans.spans.append(_reference_span(span))
    return request


TRACE, SPAN, PARENT = (
    bytes.fromhex("0af7651916cd43dd8448eb211c80319c"),
    bytes.fromhex("b7ad6b7169203331"),
    bytes(7) + b"\1",
)
ENGINE_SPANS = [
    # the processor's: one attribute, no parent in the client's send
    (TRACE, SPAN, b"", "kadence.send StartWorkflow", 4, 1_700_000_000_000_000_000, 1_700_000_000_000_000_000, (("kadence.workflow_id", "order-1"),), (), None),
    (TRACE, SPAN, PARENT, "kadence.process RespondActivityTaskCompleted", 5, 1_700_000_000_000_001_000, 1_700_000_000_000_093_000, (("kadence.workflow_id", "order-1"),), (), None),
    # the worker's, with an attempt and an error status
    (TRACE, SPAN, PARENT, "kadence.workflow_task Order", 5, 1_700_000_000_100_000_000, 1_700_000_000_100_300_000, (("kadence.workflow_id", "o"), ("kadence.attempt", 3)), (), (2, "KeyError")),
    # an activity's span, annotated by user code: events, every value type, an ok status
    (
        TRACE, SPAN, PARENT, "kadence.activity charge \u00e9", 5, 1, 2**64 - 1,
        (("s", "caf\u00e9"), ("t", True), ("f", False), ("i", -5), ("z", 0), ("big", 2**62), ("d", 2.5), ("e", ""), ("l", (1, 2))),
        (("card charged", 1_700_000_000_200_000_000, (("cents", 250), ("ok", True))), ("empty", 7, ())),
        (1, ""),
    ),
]  # fmt: skip


def test_the_engines_spans_encode_to_the_protobuf_classes_bytes():
    for span in ENGINE_SPANS:
        assert otlp_encoding.encode_span(span) == _reference_span(span).SerializeToString(deterministic=True)
    encoded = otlp_encoding.request(RESOURCE, "kadence", [otlp_encoding.encode_span(s) for s in ENGINE_SPANS])
    assert encoded == _reference_request(RESOURCE, "kadence", ENGINE_SPANS).SerializeToString(deterministic=True)
    assert ExportTraceServiceRequest.FromString(encoded) == _reference_request(RESOURCE, "kadence", ENGINE_SPANS)


def test_an_empty_batch_is_a_request_with_no_spans():
    decoded = ExportTraceServiceRequest.FromString(otlp_encoding.request(RESOURCE, "kadence", []))
    assert decoded == _reference_request(RESOURCE, "kadence", [])


_values = st.one_of(
    st.text(max_size=300),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
)
_attributes = st.lists(st.tuples(st.text(max_size=40), _values), max_size=5).map(tuple)
_spans = st.tuples(
    st.binary(min_size=16, max_size=16),
    st.binary(min_size=8, max_size=8),
    st.one_of(st.just(b""), st.binary(min_size=8, max_size=8)),
    st.text(max_size=200),
    st.sampled_from([1, 4, 5]),
    st.integers(min_value=0, max_value=2**64 - 1),
    st.integers(min_value=0, max_value=2**64 - 1),
    _attributes,
    st.lists(
        st.tuples(st.text(max_size=30), st.integers(min_value=0, max_value=2**64 - 1), _attributes), max_size=3
    ).map(tuple),
    st.one_of(st.none(), st.tuples(st.sampled_from([0, 1, 2]), st.text(max_size=50))),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_spans, max_size=4))
def test_any_span_decodes_to_what_the_protobuf_classes_build(spans):
    encoded = otlp_encoding.request(RESOURCE, "kadence", [otlp_encoding.encode_span(s) for s in spans])
    assert ExportTraceServiceRequest.FromString(encoded) == _reference_request(RESOURCE, "kadence", spans)


@pytest.mark.parametrize("n", [0, 1, 127, 128, 300, 16383, 16384, 2**35, 2**64 - 1])
def test_lengths_and_varints_at_their_byte_boundaries(n):
    span = (TRACE, SPAN, b"", "x", 1, 1, 2, (("n", n if n < 2**63 else -1),), (), (2, "e" * (n % 20000)))
    assert ExportTraceServiceRequest.FromString(otlp_encoding.request({}, "k", [otlp_encoding.encode_span(span)])) == (
        _reference_request({}, "k", [span])
    )
