"""The repository's source folders, for the tests that check the tree itself."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # tests/support/tree.py -> the repository

#: repository folder -> (component, the package it installs as)
FOLDERS = {
    "schemas": ("schemas", "kadence.schemas"),
    "topics": ("topics", "kadence.topics"),
    "readmodels": ("readmodels", "kadence.readmodels"),
    "storage": ("storage", "kadence.storage"),
    "processors": ("processors", "kadence.processors"),
    "sdk": ("sdk", "kadence"),
    "gateway": ("gateway", "kadence.gateway"),
    "connectors": ("connectors", "kadence.connectors"),
    "samples": ("samples", "kadence.samples"),
    "cli": ("cli", "kadence.cli"),
    "testing": ("testing", "kadence.testing"),
    "devstack": ("devstack", "kadence.devstack"),
    "operations": ("operations", "kadence.operations"),
}


def source_files(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def module_name(folder: str, path: Path) -> str:
    """``sdk/_client.py`` -> ``kadence._client``; ``topics/__init__.py`` -> ``kadence.topics``."""
    package = FOLDERS[folder][1]
    rel = path.relative_to(ROOT / folder).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join([package, *parts])


def _resolve_relative(current: str, is_package: bool, level: int, module: str | None) -> str:
    base = current.split(".") if is_package else current.split(".")[:-1]
    if level - 1 > len(base) - 1:
        raise ValueError(f"relative import beyond the top-level package from {current}")
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))
