"""Avro writers and readers generated as Python source, one function per record type.

``kadence.topics.avro_binary`` builds a tree of closures: every field of every record costs a
call, a tuple unpacking and a ``try`` block, and every long another call. Here each record type
becomes one straight-line function (``exec`` of source written from the parsed schema) in which
fields, optional unions, arrays and one-byte varints are inlined; a record type inside another is
a call to its own function (so a type that contains itself, like ``Failure.cause``, works).
Measured on the records of a 3-activity workflow: decision 0030.

The generated functions are the fast path only. They check nothing that the closures check for
error messages: when one raises (a value the schema cannot take, a truncated record), the closure
codec of ``avro_binary`` runs again on the same input and raises its own, precise error (with the
field's path). Both write the same bytes; ``tests/unit/test_avro_codegen.py`` compares them on
every variant of every record.

No library serves this: fastavro's compiled codecs validate every union branch on each call
(decision 0027), and the Avro codegen tools emit classes, not dict codecs.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Any

from .avro_binary import (
    _ABSENT,
    _DOUBLE,
    _PRIMITIVES,
    Encoded,
    Reader,
    Schema,
    Writer,
    _Compiler,
    _get_long,
    _put_int,
    _put_long,
)

__all__ = ["compile_reader", "compile_writer"]


def _resolve(named: dict[str, Any], schema: Schema) -> Any:  # its shape is told by _kind
    if isinstance(schema, str) and schema not in _PRIMITIVES:
        return named[schema]
    return schema


def _kind(schema: Schema) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return "union"
    kind: str = schema["type"]
    return kind


class _Source:
    """Lines of one function, with indentation and fresh local names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1
        self._names = itertools.count(1)  # local names need only be unique within the function

    def add(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def fresh(self, stem: str) -> str:
        return f"{stem}{next(self._names)}"


class _Generator:
    def __init__(self, named: dict[str, Any]) -> None:
        self.named = named
        self.slow = _Compiler(named)
        self.ns: dict[str, Any] = {
            "_put_long": _put_long,
            "_put_int": _put_int,
            "_get_long": _get_long,
            "Encoded": Encoded,
            "_ABSENT": _ABSENT,
            "_pack_double": _DOUBLE.pack,
            "_unpack_double": _DOUBLE.unpack_from,
            "_BYTES": (bytes, bytearray, memoryview),
        }
        self._writers: dict[str, str] = {}
        self._readers: dict[str, str] = {}
        self._tables: list[tuple[str, dict[str, Any]]] = []

    def _const(self, value: object) -> str:
        name = f"_k{len(self.ns)}"
        self.ns[name] = value
        return name

    @staticmethod
    def _fn_name(prefix: str, full_name: str) -> str:
        return prefix + re.sub(r"\W", "_", full_name)

    def _define(self, name: str, params: str, src: _Source) -> None:
        code = f"def {name}({params}):\n" + "\n".join(src.lines) + "\n"
        exec(compile(code, f"<avro {name}>", "exec"), self.ns)  # noqa: S102 - source built from our own schemas

    # -- writers -------------------------------------------------------------------------------

    def _function(self, built: dict[str, str], prefix: str, record_name: str) -> tuple[str, _Source | None]:
        """``(name, None)`` of a function already generated (or being generated: a type that
        contains itself calls it by name), else ``(name, source)`` for a new one."""
        fn = built.get(record_name)
        if fn is not None:
            return fn, None
        fn = built[record_name] = self._fn_name(prefix, record_name)
        return fn, _Source()

    def writer(self, record_name: str) -> str:
        """The name of the generated writer of a named record type (generated once)."""
        fn, src = self._function(self._writers, "_w_", record_name)
        if src is None:
            return fn
        schema = self.named[record_name]
        src.add("if rec.__class__ is Encoded:")
        src.add("    buf += rec")
        src.add("    return")
        src.add("get = rec.get")
        for f in schema["fields"]:
            v = src.fresh("v")
            default = f.get("default")
            src.add(f"{v} = get({f['name']!r}, {self._const(default)})")
            self._write(src, v, f["type"])
        self._define(fn, "buf, rec", src)
        return fn

    def _write(self, src: _Source, v: str, schema: Schema) -> None:
        resolved = _resolve(self.named, schema)
        kind = _kind(resolved)
        if kind in ("int", "long"):
            src.add(f"if 0 <= {v} < 64:")
            src.add(f"    buf.append({v} << 1)")
            src.add("else:")
            src.add(f"    {'_put_long' if kind == 'long' else '_put_int'}(buf, {v})")
        elif kind == "string":
            b = src.fresh("b")
            src.add(f"{b} = {v}.encode()")
            self._write_length(src, b)
            src.add(f"buf += {b}")
        elif kind == "bytes":
            src.add(f"if not isinstance({v}, _BYTES):")
            src.add("    raise TypeError('expected bytes')")
            self._write_length(src, v)
            src.add(f"buf += {v}")
        elif kind == "boolean":
            src.add(f"buf.append(1 if {v} else 0)")
        elif kind == "double":
            src.add(f"buf += _pack_double({v})")
        elif kind == "null":
            src.add(f"if {v} is not None:")
            src.add("    raise ValueError('not null')")
        elif kind == "record":
            src.add(f"{self.writer(resolved['name'])}(buf, {v})")
        elif kind in ("array", "map"):
            item = src.fresh("i")
            src.add(f"if len({v}):")
            src.add(f"    _put_long(buf, len({v}))")
            if kind == "array":
                src.add(f"    for {item} in {v}:")
            else:
                key = src.fresh("k")
                src.add(f"    for {key}, {item} in {v}.items():")
            src.depth += 2
            if kind == "map":
                self._write(src, key, "string")
            self._write(src, item, resolved["items" if kind == "array" else "values"])
            src.depth -= 2
            src.add("buf.append(0)")
        elif kind == "union":
            self._write_union(src, v, resolved)
        else:
            raise ValueError(f"unsupported Avro type {kind!r}")

    @staticmethod
    def _write_length(src: _Source, b: str) -> None:
        n = src.fresh("n")
        src.add(f"{n} = len({b})")
        src.add(f"if {n} < 64:")
        src.add(f"    buf.append({n} << 1)")
        src.add("else:")
        src.add(f"    _put_long(buf, {n})")

    def _write_union(self, src: _Source, v: str, branches: list[Any]) -> None:
        if len(branches) >= 64:
            raise ValueError("unions of 64 branches or more are not generated")
        kinds = [_kind(_resolve(self.named, b)) for b in branches]
        if len(branches) == 2 and "null" in kinds:  # ["null", T]: the common case
            other = 1 - kinds.index("null")
            src.add(f"if {v} is None:")
            src.add(f"    buf.append({kinds.index('null') << 1})")
            src.add("else:")
            src.add(f"    buf.append({other << 1})")
            src.depth += 1
            self._write(src, v, branches[other])
            src.depth -= 1
            return
        # a (name, value) tuple picks its branch by name; anything else goes to the closure codec,
        # which picks the branch by the value's type like fastavro
        by_name = {}
        for i, branch in enumerate(branches):
            resolved = _resolve(self.named, branch)
            if isinstance(resolved, dict) and resolved.get("type") == "record":
                index_and_writer = (i << 1, self.writer(resolved["name"]))
                by_name[resolved["name"]] = by_name[resolved["name"].rpartition(".")[2]] = index_and_writer
        lookup = self._const({})  # filled by fill_tables, once every branch's function exists
        self._tables.append((lookup, by_name))
        slow = self._const(self.slow.writer(branches))
        name, inner, entry = src.fresh("u"), src.fresh("x"), src.fresh("e")
        src.add(f"if type({v}) is tuple:")
        src.add(f"    {name}, {inner} = {v}")
        src.add(f"    {entry} = {lookup}[{name}]")
        src.add(f"    buf.append({entry}[0])")
        src.add(f"    {entry}[1](buf, {inner})")
        src.add("else:")
        src.add(f"    {slow}(buf, {v})")

    # -- readers -------------------------------------------------------------------------------

    def reader(self, record_name: str) -> str:
        """The name of the generated reader of a named record type (generated once)."""
        fn, src = self._function(self._readers, "_r_", record_name)
        if src is None:
            return fn
        schema = self.named[record_name]
        src.add("end = len(data)")
        src.add("rec = {}")
        for f in schema["fields"]:
            v = src.fresh("v")
            self._read(src, v, f["type"])
            src.add(f"rec[{f['name']!r}] = {v}")
        src.add("return rec, pos")
        self._define(fn, "data, pos", src)
        return fn

    @staticmethod
    def _read_long(src: _Source, target: str) -> None:
        b = src.fresh("b")
        src.add(f"{b} = data[pos]")
        src.add(f"if {b} < 128:")
        src.add(f"    {target} = ({b} >> 1) ^ -({b} & 1)")
        src.add("    pos += 1")
        src.add("else:")
        src.add(f"    {target}, pos = _get_long(data, pos)")

    def _read(self, src: _Source, target: str, schema: Schema) -> None:
        resolved = _resolve(self.named, schema)
        kind = _kind(resolved)
        if kind in ("int", "long"):
            self._read_long(src, target)
        elif kind in ("string", "bytes"):
            n, stop = src.fresh("n"), src.fresh("s")
            self._read_long(src, n)
            src.add(f"{stop} = pos + {n}")
            src.add(f"if {n} < 0 or {stop} > end:")
            src.add(f"    raise EOFError('{kind} runs past the end of the record')")
            src.add(f"{target} = data[pos:{stop}]{'.decode()' if kind == 'string' else ''}")
            src.add(f"pos = {stop}")
        elif kind == "boolean":
            src.add(f"{target} = data[pos] != 0")
            src.add("pos += 1")
        elif kind == "double":
            src.add(f"{target} = _unpack_double(data, pos)[0]")
            src.add("pos += 8")
        elif kind == "null":
            src.add(f"{target} = None")
        elif kind == "record":
            src.add(f"{target}, pos = {self.reader(resolved['name'])}(data, pos)")
        elif kind in ("array", "map"):
            count, item = src.fresh("c"), src.fresh("i")
            src.add(f"{target} = {'[]' if kind == 'array' else '{}'}")
            src.add("while True:")
            src.depth += 1
            self._read_long(src, count)
            src.add(f"if {count} == 0:")
            src.add("    break")
            src.add(f"if {count} < 0:  # a block with its size in bytes")
            src.add(f"    {count} = -{count}")
            src.add("    _, pos = _get_long(data, pos)")
            src.add(f"for _ in range({count}):")
            src.depth += 1
            if kind == "map":
                key = src.fresh("k")
                self._read(src, key, "string")
                self._read(src, item, resolved["values"])
                src.add(f"{target}[{key}] = {item}")
            else:
                self._read(src, item, resolved["items"])
                src.add(f"{target}.append({item})")
            src.depth -= 2
        elif kind == "union":
            self._read_union(src, target, resolved)
        else:
            raise ValueError(f"unsupported Avro type {kind!r}")

    def _read_union(self, src: _Source, target: str, branches: list[Any]) -> None:
        resolved = [_resolve(self.named, b) for b in branches]
        named = sum(1 for r in resolved if _kind(r) == "record") > 1  # (short name, record) values
        index = src.fresh("j")
        self._read_long(src, index)
        for i, (branch, r) in enumerate(zip(branches, resolved, strict=True)):
            src.add(f"{'if' if i == 0 else 'elif'} {index} == {i}:")
            src.depth += 1
            if named and _kind(r) == "record":
                inner = src.fresh("x")
                self._read(src, inner, branch)
                src.add(f"{target} = ({r['name'].rpartition('.')[2]!r}, {inner})")
            else:
                self._read(src, target, branch)
            src.depth -= 1
        src.add("else:")
        src.add(f"    raise ValueError(f'union branch {{{index}}} out of range')")

    def fill_tables(self) -> None:
        """Point the unions' name tables at the generated functions (they exist now)."""
        for lookup, table in self._tables:
            self.ns[lookup].update({name: (prefix, self.ns[fn]) for name, (prefix, fn) in table.items()})
        self._tables.clear()


def _generator(schema: dict[str, Any]) -> _Generator:
    named = dict(schema.get("__named_schemas", {}))
    named.setdefault(schema["name"], schema)
    return _Generator(named)


#: told of each fallback to a closure codec: ("write" or "read", "recovered" when the closure
#: codec did what the generated function could not, "refused" when it raised too, the first error)
OnFallback = Callable[[str, str, BaseException], None]


def _ignore(_direction: str, _outcome: str, _exc: BaseException) -> None:
    pass


def compile_writer(schema: dict[str, Any], on_fallback: OnFallback = _ignore) -> Writer:
    """``put(buf: bytearray, value)`` like ``avro_binary.compile_writer``: the generated writer,
    and on any error the closure writer (which raises with the field's path); ``on_fallback`` is
    told of each such fallback."""
    gen = _generator(schema)
    fast: Writer = gen.ns[gen.writer(schema["name"])]
    gen.fill_tables()
    slow = gen.slow.writer(schema)

    def put(buf: bytearray, value: Any) -> None:
        start = len(buf)
        try:
            fast(buf, value)
        except Exception as first:  # noqa: BLE001 - the closure codec names the error
            del buf[start:]
            try:
                slow(buf, value)
            except BaseException:
                del buf[start:]  # nothing of a value that cannot be written stays in buf
                on_fallback("write", "refused", first)
                raise
            on_fallback("write", "recovered", first)

    put.fast = fast  # type: ignore[attr-defined]  # the generated writer alone, for the tests
    return put


def compile_reader(schema: dict[str, Any], on_fallback: OnFallback = _ignore) -> Reader:
    """``get(data, pos) -> (value, pos)`` like ``avro_binary.compile_reader``: the generated
    reader, and on any error the closure reader (which raises the same error, worded its way);
    ``on_fallback`` is told of each such fallback."""
    gen = _generator(schema)
    fast: Reader = gen.ns[gen.reader(schema["name"])]
    slow = gen.slow.reader(schema)

    def get(data: bytes, pos: int) -> tuple[Any, int]:
        try:
            return fast(data, pos)
        except Exception as first:  # noqa: BLE001 - the closure codec raises its own error
            try:
                value = slow(data, pos)
            except BaseException:
                on_fallback("read", "refused", first)
                raise
            on_fallback("read", "recovered", first)
            return value

    get.fast = fast  # type: ignore[attr-defined]  # the generated reader alone, for the tests
    return get
