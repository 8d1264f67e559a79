"""Avro binary encoding and decoding of Kadence's own schemas, compiled once per record type.

These closure codecs are the reference: ``kadence.topics.avro_codegen`` generates faster
functions from the same schemas (decision 0030), is tested against these, and falls back to them
for the error message when a value cannot be written or a record cannot be read.

Why not fastavro here: fastavro's ``schemaless_writer`` and ``schemaless_reader`` re-collect the
named schemas on every call and validate the value against each branch of every union it writes;
with records this small that overhead dominates. Measured on the records of a 3-activity
workflow (docs/decisions/0027): a history event took 27 us to encode and 28 us to decode, a
workflow task 95 / 100 us, and encoding was over a third of the history processor's CPU. The
functions built here walk a parsed schema once and return closures that do only the writing or
reading. fastavro still parses and validates the schemas, and still decodes records written with
an older schema version (Avro schema resolution); the codecs are checked byte for byte against
fastavro in tests/unit/test_avro_binary.py.

Conventions (those of ``kadence.topics.serde``): records are dicts; a union with more than one
record branch takes and returns a ``(short_name, dict)`` tuple (a fully qualified name is
accepted too); a union of null and one other type takes and returns the value itself.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, TypeAlias, TypeVar, cast

__all__ = ["AvroValueError", "Encoded", "compile_reader", "compile_writer"]


class Encoded(bytes):
    """A record's Avro body, already encoded with the current schema set: written as it is
    wherever a record of its type is expected (a workflow task carries history events that the
    processor holds encoded; decoding and encoding them again was a tenth of its CPU)."""

    __slots__ = ()


class AvroValueError(ValueError):
    """A value the schema cannot encode; the message starts with the path of the field."""


_ABSENT = object()

_DOUBLE = struct.Struct("<d")
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_PRIMITIVES = ("null", "boolean", "int", "long", "double", "bytes", "string")

#: a schema as fastavro parses it: a type's name, a union's branches, or a complex type
Schema: TypeAlias = str | list[Any] | dict[str, Any]
#: ``put(buf, value)`` appends the value's encoding
Writer: TypeAlias = Callable[[bytearray, Any], None]
#: ``get(data, pos) -> (value, pos after it)``
Reader: TypeAlias = Callable[[bytes, int], tuple[Any, int]]
_C = TypeVar("_C", Writer, Reader)


def _put_long(buf: bytearray, n: int) -> None:
    if not _LONG_MIN <= n <= _LONG_MAX:
        raise OverflowError(f"{n} does not fit an Avro long")
    n = (n << 1) ^ (n >> 63)
    while n > 0x7F:
        buf.append((n & 0x7F) | 0x80)
        n >>= 7
    buf.append(n)


def _put_int(buf: bytearray, n: int) -> None:
    if not _INT_MIN <= n <= _INT_MAX:
        raise OverflowError(f"{n} does not fit an Avro int")
    _put_long(buf, n)


def _put_null(buf: bytearray, v: object) -> None:
    if v is not None:
        raise ValueError(f"expected null, got {type(v).__name__}")  # the type only: values may be payloads


def _put_boolean(buf: bytearray, v: object) -> None:
    buf.append(1 if v else 0)


def _put_double(buf: bytearray, v: float) -> None:
    buf += _DOUBLE.pack(v)


def _put_bytes(buf: bytearray, v: object) -> None:
    if not isinstance(v, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got {type(v).__name__}")
    _put_long(buf, len(v))
    buf += v


def _put_string(buf: bytearray, v: str) -> None:
    b = v.encode()
    _put_long(buf, len(b))
    buf += b


_PUT: dict[str, Writer] = {
    "null": _put_null,
    "boolean": _put_boolean,
    "int": _put_int,
    "long": _put_long,
    "double": _put_double,
    "bytes": _put_bytes,
    "string": _put_string,
}


def _accepts(kind: str, v: object) -> bool:
    """Whether a union branch of this kind takes the Python value (for values without a name)."""
    if kind == "null":
        return v is None
    if kind == "boolean":
        return v is True or v is False
    if kind in ("int", "long"):
        return isinstance(v, int) and not isinstance(v, bool)
    if kind == "double":
        return isinstance(v, (float, int)) and not isinstance(v, bool)
    if kind == "bytes":
        return isinstance(v, (bytes, bytearray, memoryview))
    if kind == "string":
        return isinstance(v, str)
    if kind in ("record", "map"):
        return isinstance(v, dict)
    if kind == "array":
        return isinstance(v, (list, tuple))
    return False


def _short(name: str) -> str:
    return name.rpartition(".")[2]


class _Compiler:
    """Builds the writer or reader of a type once per named type (named types may nest)."""

    def __init__(self, named: dict[str, Any]) -> None:
        self.named: dict[str, dict[str, Any]] = named
        self.writers: dict[str, Writer | None] = {}
        self.readers: dict[str, Reader | None] = {}

    def _resolve(self, schema: Schema) -> Schema:
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            return self.named[schema]
        return schema

    @staticmethod
    def _kind(schema: Schema) -> str:
        if isinstance(schema, str):
            return schema
        if isinstance(schema, list):
            return "union"
        kind = schema["type"]
        return kind if isinstance(kind, str) else "union"

    def _named_type(self, built: dict[str, _C | None], name: str, build: Callable[[Schema], _C]) -> _C:
        """The writer or reader of a named type, built once; while it is being built (a type that
        contains itself, like Failure.cause) a stand-in that calls the finished one."""
        if name not in built:
            built[name] = None
            built[name] = build(self.named[name])
        done = built[name]
        if done is not None:
            return done
        return cast(_C, lambda *args: cast(Callable[..., Any], built[name])(*args))

    # -- writers -------------------------------------------------------------------------------

    def writer(self, schema: Schema) -> Writer:
        if isinstance(schema, str) and schema in _PUT:
            return _PUT[schema]
        if isinstance(schema, str):
            return self._named_type(self.writers, schema, self.writer)
        if isinstance(schema, list):
            return self._union_writer(schema)
        kind = schema["type"]
        if kind in _PUT:
            return _PUT[kind]
        if kind == "record":
            return self._record_writer(schema)
        if kind == "array":
            return self._array_writer(self.writer(schema["items"]))
        if kind == "map":
            return self._map_writer(self.writer(schema["values"]))
        raise ValueError(f"unsupported Avro type {kind!r}")

    def _record_writer(self, schema: dict[str, Any]) -> Writer:
        built: list[tuple[str, Writer, Any]] = []
        for f in schema["fields"]:
            put, default = self.writer(f["type"]), f.get("default")
            built.append((f["name"], put, default))
        fields = tuple(built)

        def put_record(buf: bytearray, rec: Any) -> None:
            if rec.__class__ is Encoded:
                buf += rec
                return
            get = rec.get
            for name, put, default in fields:
                try:
                    put(buf, get(name, default))
                except AvroValueError as exc:
                    raise AvroValueError(f"{name}.{exc}") from None
                except (ValueError, TypeError, AttributeError, OverflowError, struct.error) as exc:
                    if name not in rec:
                        raise AvroValueError(f"{name}: required field missing") from None
                    raise AvroValueError(f"{name}: {exc}") from None

        return put_record

    @staticmethod
    def _array_writer(put_item: Writer) -> Writer:
        def put_array(buf: bytearray, items: Any) -> None:
            if len(items):  # len: None is not an empty array
                _put_long(buf, len(items))
                for item in items:
                    put_item(buf, item)
            buf.append(0)

        return put_array

    @staticmethod
    def _map_writer(put_value: Writer) -> Writer:
        def put_map(buf: bytearray, mapping: dict[str, Any]) -> None:
            if len(mapping):
                _put_long(buf, len(mapping))
                for k, v in mapping.items():
                    _put_string(buf, k)
                    put_value(buf, v)
            buf.append(0)

        return put_map

    def _union_writer(self, branches: list[Any]) -> Writer:
        by_name: dict[str, tuple[bytes, Writer]] = {}
        branch_list: list[
            tuple[str, bytes, Writer, frozenset[str] | None]
        ] = []  # (kind, index prefix, writer, field names) in branch order
        for i, branch in enumerate(branches):
            encoded = bytearray()
            _put_long(encoded, i)
            prefix = bytes(encoded)
            put = self.writer(branch)
            resolved = self._resolve(branch)
            kind = self._kind(resolved)
            names = None
            if isinstance(resolved, dict) and "name" in resolved:
                by_name[resolved["name"]] = by_name[_short(resolved["name"])] = (prefix, put)
                names = frozenset(f["name"] for f in resolved.get("fields", ()))
            else:
                by_name[kind] = (prefix, put)
            branch_list.append((kind, prefix, put, names))
        typed = tuple(branch_list)
        null = by_name["null"][0] if "null" in by_name else None
        if null is not None and len(typed) == 2:  # ["null", T]: the common case, no search
            (_, p0, w0, _), (_, p1, w1, _) = typed
            if p0 == null:

                def put_optional(buf: bytearray, v: Any) -> None:
                    if v is None:
                        buf += p0
                    else:
                        buf += p1
                        w1(buf, v)
            else:

                def put_optional(buf: bytearray, v: Any) -> None:
                    if v is None:
                        buf += p1
                    else:
                        buf += p0
                        w0(buf, v)

            return put_optional

        def put_union(buf: bytearray, v: Any) -> None:
            if type(v) is tuple:
                name, v = v
                try:
                    prefix, put = by_name[name]
                except KeyError:
                    raise ValueError(f"union has no branch named {name!r}") from None
                buf += prefix
                put(buf, v)
                return
            best: tuple[bytes, Writer, int] | None = None
            for kind, prefix, put, names in typed:
                if _accepts(kind, v):
                    if names is None:
                        best = (prefix, put, 0)
                        break
                    overlap = len(names.intersection(v))  # like fastavro: the record with most fields
                    if best is None or overlap > best[2]:
                        best = (prefix, put, overlap)
            if best is None:
                raise ValueError(f"no union branch takes a {type(v).__name__}")
            buf += best[0]
            best[1](buf, v)

        return put_union

    # -- readers -------------------------------------------------------------------------------

    def reader(self, schema: Schema) -> Reader:
        if isinstance(schema, str) and schema in _GET:
            return _GET[schema]
        if isinstance(schema, str):
            return self._named_type(self.readers, schema, self.reader)
        if isinstance(schema, list):
            return self._union_reader(schema)
        kind = schema["type"]
        if kind in _GET:
            return _GET[kind]
        if kind == "record":
            fields = tuple((f["name"], self.reader(f["type"])) for f in schema["fields"])

            def get_record(data: bytes, pos: int) -> tuple[dict[str, Any], int]:
                rec: dict[str, Any] = {}
                for name, get in fields:
                    rec[name], pos = get(data, pos)
                return rec, pos

            return get_record
        if kind == "array":
            return self._block_reader(self.reader(schema["items"]), keyed=False)
        if kind == "map":
            return self._block_reader(self.reader(schema["values"]), keyed=True)
        raise ValueError(f"unsupported Avro type {kind!r}")

    @staticmethod
    def _block_reader(get_item: Reader, keyed: bool) -> Reader:
        def get_blocks(data: bytes, pos: int) -> tuple[Any, int]:
            out: Any = {} if keyed else []
            while True:
                count, pos = _get_long(data, pos)
                if count == 0:
                    return out, pos
                if count < 0:  # a block with its size in bytes
                    count = -count
                    _, pos = _get_long(data, pos)
                for _ in range(count):
                    if keyed:
                        k, pos = _get_string(data, pos)
                        out[k], pos = get_item(data, pos)
                    else:
                        item, pos = get_item(data, pos)
                        out.append(item)

        return get_blocks

    def _union_reader(self, branches: list[Any]) -> Reader:
        resolved = [self._resolve(b) for b in branches]
        records = sum(1 for r in resolved if self._kind(r) == "record")
        readers: list[Reader] = []
        for branch, r in zip(branches, resolved, strict=True):
            get = self.reader(branch)
            if records > 1 and isinstance(r, dict) and self._kind(r) == "record":  # (short name, record)
                get = self._named(get, _short(r["name"]))
            readers.append(get)
        gets = tuple(readers)
        n = len(gets)

        def get_union(data: bytes, pos: int) -> tuple[Any, int]:
            i, pos = _get_long(data, pos)
            if not 0 <= i < n:
                raise ValueError(f"union branch {i} out of range")
            return gets[i](data, pos)

        return get_union

    @staticmethod
    def _named(get: Reader, name: str) -> Reader:
        def get_named(data: bytes, pos: int) -> tuple[tuple[str, Any], int]:
            v, pos = get(data, pos)
            return (name, v), pos

        return get_named


def _get_long(data: bytes, pos: int) -> tuple[int, int]:
    b = data[pos]
    pos += 1
    n = b & 0x7F
    shift = 7
    while b & 0x80:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if shift > 70:
            raise ValueError("varint longer than 10 bytes")
    return (n >> 1) ^ -(n & 1), pos


def _get_null(data: bytes, pos: int) -> tuple[None, int]:
    return None, pos


def _get_boolean(data: bytes, pos: int) -> tuple[bool, int]:
    return data[pos] != 0, pos + 1


def _get_double(data: bytes, pos: int) -> tuple[float, int]:
    return _DOUBLE.unpack_from(data, pos)[0], pos + 8


def _get_bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    n, pos = _get_long(data, pos)
    end = pos + n
    if n < 0 or end > len(data):
        raise EOFError("bytes run past the end of the record")
    return data[pos:end], end


def _get_string(data: bytes, pos: int) -> tuple[str, int]:
    n, pos = _get_long(data, pos)
    end = pos + n
    if n < 0 or end > len(data):
        raise EOFError("string runs past the end of the record")
    return data[pos:end].decode(), end


_GET: dict[str, Reader] = {
    "null": _get_null,
    "boolean": _get_boolean,
    "int": _get_long,
    "long": _get_long,
    "double": _get_double,
    "bytes": _get_bytes,
    "string": _get_string,
}


def compile_writer(schema: dict[str, Any]) -> Writer:
    """``put(buf: bytearray, value)`` for a schema parsed by fastavro (``__named_schemas`` set)."""
    return _Compiler(schema.get("__named_schemas", {})).writer(schema)


def compile_reader(schema: dict[str, Any]) -> Reader:
    """``get(data: bytes, pos) -> (value, pos)`` for a schema parsed by fastavro."""
    return _Compiler(schema.get("__named_schemas", {})).reader(schema)
