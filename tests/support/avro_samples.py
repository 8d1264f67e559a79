"""Representative records of a schema set: values of every record type that between them take
every union branch (what the codec and schema tests encode, decode and compare)."""

from __future__ import annotations

from kadence.schemas import CURRENT_VERSION, load_schema_set

from .fastavro_reference import NS

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


class Samples:
    """Builds values of a schema set's types that between them take every union branch.

    Values use the form ``serde`` returns: a union with more than one record branch is a
    ``(short_name, dict)`` tuple, any other union value is the bare value.
    """

    def __init__(self, schema_set: list[dict], version: int = CURRENT_VERSION):
        self.named = {s["name"]: s for s in schema_set}
        self.version = version  # envelopes say which version wrote them
        self._counter = 0

    def _next(self) -> int:
        self._counter += 1
        return self._counter

    def _primitive(self, kind: str, path: str):
        n = self._next()
        return {
            "null": None,
            "boolean": n % 2 == 0,
            "int": 1000 + n,
            "long": 1_700_000_000_000 + n,
            "float": 0.5 + n,  # exact in binary
            "double": 0.25 + n,
            "bytes": f"{path}#{n}".encode() + b"\x00\xff",
            "string": f"{path}#{n}-é✓",
        }[kind]

    def _short(self, name: str) -> str:
        return name[len(NS) :] if name.startswith(NS) else name

    def variants(self, schema, path: str, stack: tuple = ()) -> list:
        """Values of ``schema``; together they cover every union branch below it."""
        if isinstance(schema, str):
            if schema in PRIMITIVES:
                return [self._primitive(schema, path)]
            return self.variants(self.named[self._short(schema)], path, stack)
        if isinstance(schema, list):  # union
            records = [b for b in schema if self._is_record(b)]
            out = []
            for branch in schema:
                if branch == "null":
                    continue
                if self._is_record(branch) and stack.count(self._name(branch)) >= 2:
                    continue  # recursive type (Failure.cause): stop after two levels
                for value in self.variants(branch, path, stack):
                    out.append((self._name(branch), value) if len(records) > 1 and self._is_record(branch) else value)
            if "null" in schema:
                out.append(None)
            return out
        kind = schema["type"]
        if kind == "record":
            name = schema["name"]
            stack = (*stack, name)
            fields = [
                (
                    f["name"],
                    [self.version]
                    if f["name"] == "schema_version" and f["type"] == "int"
                    else self.variants(f["type"], f"{name}.{f['name']}", stack),
                )
                for f in schema["fields"]
            ]
            base = {fname: vs[0] for fname, vs in fields}
            out = [base]
            for fname, vs in fields:
                for other in vs[1:]:
                    out.append({**base, fname: other})
            return out
        if kind == "array":
            return [self.variants(schema["items"], path + "[]", stack)]
        if kind == "map":
            return [{f"k{i}": v for i, v in enumerate(self.variants(schema["values"], path + "{}", stack))}]
        if kind == "enum":
            return [schema["symbols"][0]]
        if kind == "fixed":
            return [bytes(range(schema["size"]))]
        if kind in PRIMITIVES:
            return [self._primitive(kind, path)]
        raise AssertionError(f"unsupported schema {schema!r}")

    def _is_record(self, schema) -> bool:
        if isinstance(schema, str):
            return schema not in PRIMITIVES and self.named[self._short(schema)]["type"] == "record"
        return isinstance(schema, dict) and schema.get("type") == "record"

    def _name(self, schema) -> str:
        return self._short(schema if isinstance(schema, str) else schema["name"])


#: every record type of the current schema set
RECORDS = sorted(s["name"] for s in load_schema_set())


def samples(record: str) -> list[dict]:
    """Values of ``record`` that between them take every union branch."""
    schema = next(s for s in load_schema_set() if s["name"] == record)
    return Samples(load_schema_set()).variants(schema, record)


def typed_search_attribute(value) -> bool:
    """Whether a sample holds a search attribute value that is not a string: a union branch
    version 13 added to the attribute maps' values, which a writer pinned to an older version
    cannot write (and a release of an older version is never sent)."""
    if isinstance(value, tuple):
        return any(typed_search_attribute(v) for v in value)
    if isinstance(value, dict):
        sa = value.get("search_attributes")
        if isinstance(sa, dict) and any(not isinstance(v, str) for v in sa.values()):
            return True
        return any(typed_search_attribute(v) for v in value.values())
    if isinstance(value, list):
        return any(typed_search_attribute(v) for v in value)
    return False
