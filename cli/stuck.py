"""``kadence stuck``: running workflows whose last workflow task failed."""

from __future__ import annotations

import click

from kadence.topics import KafkaConfig

from .output import emit_rows, output_option

__all__ = ["stuck"]


@click.command()
@output_option
@click.pass_obj
def stuck(config: KafkaConfig, output: str) -> None:
    """List running workflows whose last workflow task failed (e.g. non-determinism), with the error."""
    from kadence.topics.state_reader import stuck_rows

    rows = []
    for row in stuck_rows(config):
        message = row["error_message"] if output == "json" else row["error_message"][:200]
        rows.append({**row, "error": f"{row['error_type']}: {message}", "error_message": message})
    emit_rows(rows, ("workflow_id", "run_id", "workflow_type", "cause", "error"), output)
