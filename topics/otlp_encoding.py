"""OTLP's protobuf wire format for the engine's spans, written by hand (decision 0049).

The engine's span pipeline (``span_export``) encodes each span when it ends, on the thread that
ended it, into the bytes of one ``opentelemetry.proto.trace.v1.Span``; the export thread only
joins a batch's bytes under the request's envelope (``request``). Building the same message with
the ``opentelemetry-proto`` classes cost 3.3 µs a span, on the export thread, holding the GIL
while the engine's main thread waited for it; this costs about a third of that and leaves the
export thread almost nothing to do with the GIL. ``tests/unit/test_otlp_encoding.py`` holds it
byte for byte to what the protobuf classes write, for every value type it takes.

Only what the engine's spans use is written: IDs, name, kind, times, attributes (str, bool, int,
float: anything else as its text), events with attributes, and a status. No links, no trace state,
no dropped counts (always zero here, which protobuf leaves out too).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["encode_span", "key_values", "request"]

_Q = struct.Struct("<Q")
_TIMES = struct.Struct("<BQBQ")  # Span.start_time_unix_nano (7) and end_time_unix_nano (8), fixed64
_DOUBLE = struct.Struct("<d")

#: names and attribute keys already encoded with their tag and length (a span's name is one of a
#: few dozen: "kadence.process StartWorkflow", ...; bounded so odd names cannot grow it forever)
_NAMES: dict[str, bytes] = {}
_KEYS: dict[str, bytes] = {}
_CACHE_LIMIT = 4096


def _varint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field: its tag byte (field numbers below 16), length, payload."""
    return bytes((tag,)) + _varint(len(payload)) + payload


def _any_value(value: object) -> bytes:
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"  # bool_value = 2
    if isinstance(value, int):
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)  # int_value = 3 (int64: two's complement)
    if isinstance(value, float):
        return b"\x21" + _DOUBLE.pack(value)  # double_value = 4
    return _field(0x0A, str(value).encode())  # string_value = 1


def _key(key: str) -> bytes:
    cached = _KEYS.get(key)
    if cached is None:
        cached = _field(0x0A, key.encode())  # KeyValue.key = 1
        if len(_KEYS) < _CACHE_LIMIT:
            _KEYS[key] = cached
    return cached


def _key_value(tag: int, key: str, value: object) -> bytes:
    """One ``KeyValue`` as the field ``tag`` of its parent."""
    key_field = _KEYS.get(key) or _key(key)
    if type(value) is str:  # the common case (a workflow ID), its lengths one byte each
        text = value.encode()
        size = len(key_field) + len(text) + 4
        if size < 0x80:
            return bytes((tag, size)) + key_field + bytes((0x12, len(text) + 2, 0x0A, len(text))) + text
    return _field(tag, key_field + _field(0x12, _any_value(value)))  # KeyValue.value = 2


def key_values(tag: int, attributes: Iterable[tuple[str, object]]) -> bytes:
    """Attributes as repeated ``KeyValue`` fields numbered ``tag`` (a tag byte: field << 3 | 2)."""
    return b"".join([_key_value(tag, k, v) for k, v in attributes])


def _name(name: str) -> bytes:
    cached = _NAMES.get(name)
    if cached is None:
        cached = _field(0x2A, name.encode())  # Span.name = 5
        if len(_NAMES) < _CACHE_LIMIT:
            _NAMES[name] = cached
    return cached


def encode_span(span: tuple[Any, ...]) -> bytes:
    """One ``Span`` message (without its own tag and length) from the pipeline's span tuple:
    (trace_id 16 bytes, span_id 8 bytes, parent span_id 8 bytes or b"", name, kind, start ns,
    end ns, attributes ((key, value), ...), events ((name, time ns, attributes), ...), status
    None or (code, description))."""
    trace_id, span_id, parent, name, kind, start, end, attributes, events, status = span
    parts = [b"\x0a\x10", trace_id, b"\x12\x08", span_id]  # trace_id = 1, span_id = 2
    if parent:
        parts += (b"\x22\x08", parent)  # parent_span_id = 4
    parts += (_name(name), b"\x30", _varint(kind), _TIMES.pack(0x39, start, 0x41, end))  # kind = 6
    for k, v in attributes:
        parts.append(_key_value(0x4A, k, v))  # attributes = 9
    for event_name, at, event_attributes in events:  # events = 11: time = 1, name = 2, attributes = 3
        body = b"\x09" + _Q.pack(at) + _field(0x12, event_name.encode()) + key_values(0x1A, event_attributes)
        parts.append(_field(0x5A, body))
    if status is not None:  # status = 15: message = 2, code = 3
        code, message = status
        body = (_field(0x12, message.encode()) if message else b"") + (b"\x18" + _varint(code) if code else b"")
        parts.append(_field(0x7A, body))
    return b"".join(parts)


def request(resource: Mapping[str, object], scope: str, spans: Iterable[bytes]) -> bytes:
    """An ``ExportTraceServiceRequest`` holding one resource, one instrumentation scope and the
    encoded ``spans`` (``encode_span``'s bytes)."""
    # ScopeSpans: scope = 1 (InstrumentationScope.name = 1), spans = 2
    scope_spans = _field(0x0A, _field(0x0A, scope.encode())) + b"".join([_field(0x12, s) for s in spans])
    # ResourceSpans: resource = 1 (Resource.attributes = 1), scope_spans = 2
    resource_spans = _field(0x0A, key_values(0x0A, resource.items())) + _field(0x12, scope_spans)
    return _field(0x0A, resource_spans)  # ExportTraceServiceRequest.resource_spans = 1
