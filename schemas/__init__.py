"""Avro schemas of every record that crosses Kafka.

The ``*.avsc`` files beside this module are the current schemas; ``versions/<n>/`` holds the
frozen set of every released schema version. Each record on the wire starts with a two-byte
prefix naming the version it was written with (see ``kadence.topics.serde``), so a reader with
newer schemas resolves old records with Avro's schema-resolution rules.

Evolution rules (checked by tests/unit/test_schema_evolution.py):

* add a field only with a default; never remove a field without a default or change its type;
* add new branches to a union only at the end;
* when a schema changes, bump ``CURRENT_VERSION`` and freeze the whole set under
  ``versions/<CURRENT_VERSION>/``.
"""

from __future__ import annotations

import json
from importlib import resources

__all__ = ["CURRENT_VERSION", "available_versions", "load_schema_set"]

CURRENT_VERSION = 11


def _root():
    return resources.files(__name__)


def available_versions() -> list[int]:
    """Every frozen schema-set version, oldest first."""
    vdir = _root().joinpath("versions")
    return sorted(int(p.name) for p in vdir.iterdir() if p.name.isdigit())


def load_schema_set(version: int | None = None) -> list[dict]:
    """The schemas of one version (``None``: the current files), in dependency order."""
    base = _root() if version is None else _root().joinpath("versions", str(version))
    names = base.joinpath("ORDER").read_text().split()
    return [json.loads(base.joinpath(f"{name}.avsc").read_text()) for name in names]
