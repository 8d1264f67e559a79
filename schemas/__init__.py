"""Avro schemas of every record that crosses Kafka.

The ``*.avsc`` files beside this module (listed in dependency order by ``ORDER``) are the
current schemas, the ones to edit. Every released schema version is frozen in a schema store:

* ``store/<digest>.avsc``: each distinct schema once, named by the first 16 hex digits of the
  SHA-256 of its canonical JSON (keys sorted, no spaces). Avro's Parsing Canonical Form is not
  the key: it drops defaults and docs, and two schemas that differ only in a default resolve old
  records differently (decision 0045);
* ``versions/<n>.json``: the manifest of version ``n``: its record names in dependency order and
  the digest of each one's schema.

Each record on the wire starts with a two-byte prefix naming the version it was written with
(``kadence.topics.serde``), so a reader with newer schemas resolves old records with Avro's
schema-resolution rules.

Evolution rules (checked by tests/unit/test_schema_evolution.py):

* add a field only with a default; never remove a field without a default or change its type;
* add new branches to a union only at the end;
* when a schema changes, bump ``CURRENT_VERSION`` and freeze the set:
  ``python -m kadence.schemas freeze`` writes ``versions/<CURRENT_VERSION>.json`` and the store
  files it needs. A frozen version is never edited.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

__all__ = ["CURRENT_VERSION", "available_versions", "freeze", "load_schema_set", "manifest", "schema_digest"]

CURRENT_VERSION = 22


def _root() -> Traversable:
    return resources.files(__name__)


def schema_digest(schema: dict[str, Any]) -> str:
    """The store name of ``schema``: 16 hex digits of the SHA-256 of its canonical JSON."""
    canonical = json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def available_versions() -> list[int]:
    """Every frozen schema-set version, oldest first."""
    vdir = _root().joinpath("versions")
    return sorted(int(p.name[: -len(".json")]) for p in vdir.iterdir() if p.name.endswith(".json"))


def manifest(version: int) -> dict[str, Any]:
    """``{"version": n, "order": [record names], "schemas": {name: digest}}`` of a frozen version."""
    loaded: dict[str, Any] = json.loads(_root().joinpath("versions", f"{version}.json").read_text())
    return loaded


def load_schema_set(version: int | None = None) -> list[dict[str, Any]]:
    """The schemas of one version (``None``: the current files), in dependency order.

    A frozen version's schemas come from the store; each is checked against its digest, so a
    store file edited after it was frozen fails to load instead of misreading records."""
    if version is None:
        base = _root()
        names = base.joinpath("ORDER").read_text().split()
        return [json.loads(base.joinpath(f"{name}.avsc").read_text()) for name in names]
    frozen = manifest(version)
    out = []
    for name in frozen["order"]:
        digest = frozen["schemas"][name]
        schema = json.loads(_root().joinpath("store", f"{digest}.avsc").read_text())
        if schema_digest(schema) != digest:
            raise ValueError(f"schemas/store/{digest}.avsc does not match its digest: a frozen schema was edited")
        out.append(schema)
    return out


def freeze(version: int, directory: Path | None = None) -> Path:
    """Write the current schemas as version ``version``: its manifest and the store files it
    needs (the ones already there are shared). Refuses to overwrite an existing version."""
    base = Path(directory) if directory is not None else Path(__file__).resolve().parent
    target = base / "versions" / f"{version}.json"
    if target.exists():
        raise FileExistsError(f"{target} exists: a frozen version is never rewritten")
    names = (base / "ORDER").read_text().split()
    digests = {}
    for name in names:
        schema = json.loads((base / f"{name}.avsc").read_text())
        digests[name] = digest = schema_digest(schema)
        path = base / "store" / f"{digest}.avsc"
        if not path.exists():
            path.parent.mkdir(exist_ok=True)
            path.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n")
    target.parent.mkdir(exist_ok=True)
    target.write_text(json.dumps({"version": version, "order": names, "schemas": digests}, indent=2) + "\n")
    return target
