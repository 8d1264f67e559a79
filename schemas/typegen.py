"""Typed definitions of the records, generated from the current schemas (issue 20, decision 0047).

``python -m kadence.schemas types`` writes ``schemas/records.py``: one ``TypedDict`` per named
record, named as the record, in the order of ``ORDER``. A ``TypedDict`` describes the plain
dicts the codecs already read and write, so typing a record costs nothing at run time (the
decision record has the measurement against dataclasses). The mapping:

* ``null`` ``None``; ``boolean`` ``bool``; ``int``/``long`` ``int``; ``float``/``double``
  ``float``; ``bytes``/``fixed`` ``bytes``; ``string`` ``str``; an ``enum`` a ``Literal`` of its
  symbols; an ``array`` a ``list``; a ``map`` a ``dict[str, ...]``;
* a named record: its ``TypedDict``;
* a union: the union of its branches; a union with more than one record branch reads and writes
  a record as a ``(short name, record)`` tuple (``kadence.topics.avro_codegen``), so each of
  those branches is ``tuple[Literal["Name"], Name]``;
* a field with a default may be left out when a record is written (the writers fill the
  default in): ``NotRequired``. Every field is present in a record that was read.

``tests/unit/test_record_types.py`` holds the committed module to this generator's output, so a
schema edited without ``python -m kadence.schemas types`` fails the tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import load_schema_set

__all__ = ["render", "write"]

_PRIMITIVES = {
    "null": "None",
    "boolean": "bool",
    "int": "int",
    "long": "int",
    "float": "float",
    "double": "float",
    "bytes": "bytes",
    "string": "str",
}

_HEADER = '''"""The records that cross Kafka, as ``TypedDict`` definitions: GENERATED from the schemas by
``python -m kadence.schemas types`` (``kadence.schemas.typegen``). Do not edit by hand.

The annotations are evaluated (no ``from __future__ import annotations``), so each type's
``__required_keys__`` and ``__optional_keys__`` are right at run time; a record is defined
before the records that use it."""

from typing import Literal, NotRequired, Protocol, TypedDict, TypeVar, overload

__all__ = [
'''


def _short(name: str) -> str:
    return name.rpartition(".")[2]


class _Renderer:
    def __init__(self) -> None:
        #: record name -> its class body, in the order completed (a record after those it uses)
        self.classes: dict[str, str] = {}
        self._started: set[str] = set()
        #: whether the type being rendered names a record not defined yet (``record``)
        self._forward = False
        self.named: dict[str, dict[str, Any]] = {}

    def record(self, schema: dict[str, Any]) -> str:
        name = _short(schema["name"])
        if name in self._started:
            if name not in self.classes:  # a record that holds itself (a failure's cause)
                self._forward = True
            return name
        self._started.add(name)
        self.named[name] = schema
        outer_forward = self._forward  # an inline record is rendered in the middle of a field's type
        lines = []
        doc = schema.get("doc")
        lines.append(f"class {name}(TypedDict):")
        lines.append(f'    """{_docstring(doc) if doc else f"The {name} record."}"""')
        lines.append("")
        for f in schema["fields"]:
            self._forward = False
            kind = self.type_of(f["type"])
            if self._forward:  # a name not defined yet: the whole type as a string, resolved later
                kind = f'"{kind}"'
            if "default" in f:
                kind = f"NotRequired[{kind}]"
            if f.get("doc"):
                lines.append(f"    #: {_comment(f['doc'])}")
            lines.append(f"    {f['name']}: {kind}")
        self.classes[name] = "\n".join(lines)
        self._forward = outer_forward
        return name

    def type_of(self, schema: Any) -> str:
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return _PRIMITIVES[schema]
            short = _short(schema)
            if short in self._started and short not in self.classes:
                self._forward = True
            elif short not in self.classes:
                raise ValueError(f"record {schema!r} is used before it is defined (check ORDER)")
            return short
        if isinstance(schema, list):
            records = [b for b in schema if self._is_record(b)]
            parts = []
            for branch in schema:
                inner = self.type_of(branch)
                if len(records) > 1 and self._is_record(branch):
                    inner = f'tuple[Literal["{inner}"], {inner}]'
                parts.append(inner)
            # None last, as a reader expects "X | None"
            parts.sort(key=lambda p: p == "None")
            return " | ".join(parts)
        kind = schema["type"]
        if kind == "record":
            return self.record(schema)
        if kind == "array":
            return f"list[{self.type_of(schema['items'])}]"
        if kind == "map":
            return f"dict[str, {self.type_of(schema['values'])}]"
        if kind == "enum":
            return "Literal[" + ", ".join(f'"{s}"' for s in schema["symbols"]) + "]"
        if kind == "fixed":
            return "bytes"
        if kind in _PRIMITIVES:  # {"type": "long"} and the like
            return _PRIMITIVES[kind]
        raise ValueError(f"no Python type for the Avro type {kind!r}")

    def _is_record(self, branch: Any) -> bool:
        if isinstance(branch, dict):
            return branch.get("type") == "record"
        return isinstance(branch, str) and branch not in _PRIMITIVES


def _docstring(doc: str) -> str:
    return " ".join(doc.split()).replace("\\", "\\\\").replace('"""', "'''")


def _comment(doc: str) -> str:
    return " ".join(doc.split())


def render() -> str:
    """The text of ``records.py`` for the current schemas."""
    r = _Renderer()
    for schema in load_schema_set():
        r.record(schema)
    names = list(r.classes)
    out = [_HEADER]
    out.extend(f'    "{n}",\n' for n in sorted([*names, _EMITTER]))
    out.append("]\n")
    for name in names:
        out.append("\n\n" + r.classes[name] + "\n")
    out.append(_emitter(_event_types()))
    return "".join(out)


#: the protocol of the processors' ``emit``, one overload per history event type
_EMITTER = "EmitHistoryEvent"


def _event_types() -> list[str]:
    """The record names of ``HistoryEvent.attributes``' branches, in the schema's order."""
    history = next(s for s in load_schema_set() if _short(s["name"]) == "HistoryEvent")
    branches = next(f["type"] for f in history["fields"] if f["name"] == "attributes")
    return [_short(b if isinstance(b, str) else b["name"]) for b in branches]


def _emitter(events: list[str]) -> str:
    """``EmitHistoryEvent``: ``emit(t, st, "TimerStarted", {...})`` with the attributes checked
    against the event's own record (a misspelt attribute is a type checker's finding, not the
    codec's at commit time); generic over the transition, state and event types."""
    lines = [
        '\n\n_T = TypeVar("_T", contravariant=True)',
        '_S = TypeVar("_S", contravariant=True)',
        '_R = TypeVar("_R", covariant=True)',
        "",
        "",
        f"class {_EMITTER}(Protocol[_T, _S, _R]):",
        '    """A history event appended to a run, its attributes typed by its event type."""',
    ]
    for name in events:
        lines += [
            "",
            "    @overload",
            "    def __call__(",
            f'        self, t: _T, st: _S, etype: Literal["{name}"], attributes: {name}, *, '
            "request_id: str | None = None, ts: int | None = None",
            "    ) -> _R: ...",
        ]
    return "\n".join(lines) + "\n"


def write(path: Path | None = None) -> Path:
    """Write ``records.py`` (default: beside this module); returns its path."""
    target = path or Path(__file__).with_name("records.py")
    target.write_text(render())
    return target
