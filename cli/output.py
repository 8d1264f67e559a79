"""One output option for the commands that list things: ``-o tsv`` (the default, one line per
row, tab-separated: for ``cut`` and ``awk``), ``-o json`` (one JSON document) or ``-o table``
(aligned columns, for people)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import click

__all__ = ["FORMATS", "emit_rows", "output_option"]

FORMATS = ("tsv", "json", "table")


def output_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "-o",
        "--output",
        "output",
        type=click.Choice(FORMATS),
        default="tsv",
        show_default=True,
        help="tsv: a tab-separated line per row; json: one document; table: aligned columns",
    )(fn)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
    # a tab or newline in a value would break the row apart: escape them
    return str(value).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def emit_rows(
    rows: Sequence[dict[str, Any]],
    columns: Sequence[str],
    fmt: str,
    *,
    extra: dict[str, Any] | None = None,
    echo: Callable[[str], None] = click.echo,
) -> None:
    """Print ``rows`` (dicts) in ``fmt``. tsv and table show ``columns`` in that order; json
    prints ``{"items": rows, **extra}`` with every field of each row."""
    if fmt == "json":
        echo(json.dumps({"items": list(rows), **(extra or {})}, sort_keys=True, default=str))
        return
    if fmt == "tsv":
        for row in rows:
            echo("\t".join(_cell(row.get(c)) for c in columns))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(*columns, box=None, pad_edge=False, highlight=False)
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in columns))
    console = Console(width=200, color_system=None)
    with console.capture() as captured:
        console.print(table)
    echo(captured.get().rstrip("\n"))
