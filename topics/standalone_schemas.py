"""Self-contained Avro schemas: one record type of the schema store with every named type it uses
defined at its first use, as a reader without the rest of the store needs it (the AsyncAPI
document, the clients' ``.avsc`` files, the subjects of a schema registry)."""

from __future__ import annotations

import copy
from typing import Any

from kadence.schemas import load_schema_set

__all__ = ["self_contained"]

_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def _named(schema_set: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}

    def collect(node: Any, namespace: str) -> None:
        if isinstance(node, dict):
            if node.get("type") in ("record", "enum", "fixed") and "name" in node:
                ns = node.get("namespace", namespace)
                out[node["name"] if "." in node["name"] else f"{ns}.{node['name']}"] = node
                namespace = ns
            for value in node.values():
                collect(value, namespace)
        elif isinstance(node, list):
            for item in node:
                collect(item, namespace)

    for schema in schema_set:
        collect(schema, schema.get("namespace", ""))
    return out


def self_contained(record: str, schema_set: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The schema of ``record`` (a short name) with every named type it uses defined at its first
    use, as a reader without the rest of the schema set needs it."""
    schemas = load_schema_set() if schema_set is None else schema_set
    named = _named(schemas)
    defined: set[str] = set()

    def full(name: str, namespace: str) -> str:
        return name if "." in name else f"{namespace}.{name}"

    def expand(node: Any, namespace: str) -> Any:
        if isinstance(node, str):
            if node in _PRIMITIVES:
                return node
            key = full(node, namespace) if full(node, namespace) in named else node
            if key in defined or key not in named:
                return node
            return expand(copy.deepcopy(named[key]), namespace)
        if isinstance(node, list):
            return [expand(item, namespace) for item in node]
        if isinstance(node, dict):
            kind = node.get("type")
            if kind in ("record", "enum", "fixed") and "name" in node:
                ns = node.get("namespace", namespace)
                defined.add(full(node["name"], ns))
                out = dict(node)
                if kind == "record":
                    out["fields"] = [{**f, "type": expand(f["type"], ns)} for f in node["fields"]]
                return out
            if kind == "array":
                return {**node, "items": expand(node["items"], namespace)}
            if kind == "map":
                return {**node, "values": expand(node["values"], namespace)}
            return node
        return node

    root = next((s for s in schemas if s["name"] == record), None)
    if root is None:
        raise KeyError(f"no schema named {record!r}")
    out: dict[str, Any] = expand(copy.deepcopy(root), root.get("namespace", ""))
    return out
