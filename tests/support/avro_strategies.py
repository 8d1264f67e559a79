"""Hypothesis strategies for the values of a schema set's records, in the form ``serde`` takes
and returns (a union with more than one record branch is a ``(short_name, dict)`` tuple; any
other union value is bare). For the property tests of the codecs (issue 20, item 5)."""

from __future__ import annotations

from hypothesis import strategies as st

from kadence.schemas import CURRENT_VERSION, load_schema_set

from .fastavro_reference import NS

INT = (-(2**31), 2**31 - 1)
LONG = (-(2**63), 2**63 - 1)


class Strategies:
    def __init__(self, schema_set: list[dict] | None = None, version: int = CURRENT_VERSION):
        schema_set = schema_set if schema_set is not None else load_schema_set()
        self.named = {s["name"]: s for s in schema_set}
        self.version = version

    def _short(self, name: str) -> str:
        return name[len(NS) :] if name.startswith(NS) else name

    def _is_record(self, schema) -> bool:
        if isinstance(schema, str):
            named = self.named.get(self._short(schema))
            return named is not None and named["type"] == "record"
        return isinstance(schema, dict) and schema.get("type") == "record"

    def _name(self, schema) -> str:
        return self._short(schema if isinstance(schema, str) else schema["name"])

    def of(self, schema, stack: tuple = ()) -> st.SearchStrategy:
        """``stack``: the records being built around this value; a union branch that would
        nest a record inside itself (``Failure.cause``) is left out, so values stay finite."""
        if isinstance(schema, str):
            primitive = {
                "null": st.none(),
                "boolean": st.booleans(),
                "int": st.integers(*INT),
                "long": st.integers(*LONG),
                "float": st.floats(width=32, allow_nan=False),
                "double": st.floats(allow_nan=False),
                "bytes": st.binary(max_size=40),
                "string": st.text(max_size=20),
            }.get(schema)
            if primitive is not None:
                return primitive
            return self.of(self.named[self._short(schema)], stack)
        if isinstance(schema, list):  # union
            records = [b for b in schema if b != "null" and self._is_record(b)]
            branches = []
            for branch in schema:
                if branch == "null":
                    branches.append(st.none())
                    continue
                if self._is_record(branch) and self._name(branch) in stack:
                    continue  # a recursive type (Failure.cause): one level
                inner = self.of(branch, stack)
                if len(records) > 1 and self._is_record(branch):
                    name = self._name(branch)
                    inner = inner.map(lambda v, n=name: (n, v))
                branches.append(inner)
            return st.one_of(*branches)
        kind = schema["type"]
        if kind == "record":
            stack = (*stack, schema["name"])
            fields = {}
            for f in schema["fields"]:
                if f["name"] == "schema_version" and f["type"] == "int":
                    fields[f["name"]] = st.just(self.version)
                else:
                    fields[f["name"]] = self.of(f["type"], stack)
            return st.fixed_dictionaries(fields)
        if kind == "array":
            return st.lists(self.of(schema["items"], stack), max_size=2)
        if kind == "map":
            return st.dictionaries(st.text(max_size=8), self.of(schema["values"], stack), max_size=2)
        if kind == "enum":
            return st.sampled_from(schema["symbols"])
        if kind == "fixed":
            return st.binary(min_size=schema["size"], max_size=schema["size"])
        return self.of(kind, stack)


_CACHE: dict[str, st.SearchStrategy] = {}


def record_values(record: str) -> st.SearchStrategy:
    """The strategy of ``record``'s values (built once per record: the same object each draw)."""
    if record not in _CACHE:
        strategies = Strategies()
        _CACHE[record] = strategies.of(strategies.named[record])
    return _CACHE[record]
