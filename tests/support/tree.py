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
    "operations": ("operations", "kadence.operations"),
}


def source_files(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)
