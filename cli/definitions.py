"""Loading a user's module of workflows and activities for ``kadence worker``, ``replay`` and
``reset --dry-run --module``."""

from __future__ import annotations

import importlib
from typing import Any

import click

__all__ = ["load_definitions"]


def load_definitions(module_name: str) -> tuple[list[Any], list[Any]]:
    """``WORKFLOWS`` and ``ACTIVITIES`` lists of a module."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.UsageError(f"cannot import {module_name}: {exc}") from exc
    return list(getattr(module, "WORKFLOWS", [])), list(getattr(module, "ACTIVITIES", []))
