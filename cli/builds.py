"""``kadence builds``: worker builds of task queues (build-ID pinning).

kadence builds promote QUEUE BUILD       new workflows of QUEUE start on BUILD
kadence builds list [QUEUE]              builds, default, backlog, oldest waiting task
kadence builds move WORKFLOW_ID BUILD    move an open run to another build (--unpin: unversioned)
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Any

import click

from kadence.topics import KadenceError, KafkaConfig

from .output import emit_rows, output_option

__all__ = ["builds"]

audit = logging.getLogger("kadence.audit")


@click.group()
def builds() -> None:
    """Worker builds: which build new workflows start on, backlogs, moving workflows."""


@builds.command("promote")
@click.argument("task_queue")
@click.argument("build_id", required=False)
@click.option("--unversioned", is_flag=True, help="new workflows start unversioned (no build)")
@click.pass_obj
def promote(config: KafkaConfig, task_queue: str, build_id: str | None, unversioned: bool) -> None:
    """Make BUILD_ID the build that new workflows of TASK_QUEUE start on (open ones stay on theirs)."""
    from kadence.topics.builds import promote_build

    if (build_id is None) == (not unversioned):
        raise click.UsageError("give a BUILD_ID or --unversioned (not both)")
    audit.warning("promotion of build %s on task queue %s requested from the CLI", build_id, task_queue)
    try:
        promote_build(config, task_queue, build_id, identity=config.client_id)
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo(f"{task_queue}: new workflows start on {build_id or '(unversioned)'}")


def _open_runs(config: KafkaConfig) -> dict[tuple[str, str | None], int]:
    from kadence.topics.state_reader import read_states

    counts: dict[tuple[str, str | None], int] = {}
    for st in read_states(config).values():
        if st["status"] == "running":
            key = (st["task_queue"], st["build_id"])
            counts[key] = counts.get(key, 0) + 1
    return counts


@builds.command("list")
@click.argument("task_queue", required=False)
@click.option(
    "--count-open",
    is_flag=True,
    help="also count the open workflows pinned to each build (reads the whole state topic)",
)
@click.option("--json", "as_json", is_flag=True, help='print the rows as a JSON array (-o json: {"items": [...]})')
@output_option
@click.pass_obj
def list_builds(config: KafkaConfig, task_queue: str | None, count_open: bool, as_json: bool, output: str) -> None:
    """Every build of every queue (or of TASK_QUEUE): default?, backlog, oldest waiting task."""
    from kadence.topics.backlog import build_backlogs

    try:
        rows = build_backlogs(config, task_queue)
        opened = _open_runs(config) if count_open else None
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    out = []
    for b in rows:
        row = {
            "task_queue": b.task_queue,
            "build_id": b.build_id,
            "default": b.is_default,
            "backlog": b.backlog,
            "oldest_task_age_s": None if b.oldest_age_s is None else round(b.oldest_age_s, 1),
        }
        if opened is not None:
            row["open_workflows"] = opened.get((b.task_queue, b.build_id), 0)
        out.append(row)
    if as_json:  # the list itself, as before -o existed
        click.echo(json.dumps(out, indent=2))
        return
    shown = [{**r, "build_id": r["build_id"] or "(unversioned)", "default": "*" if r["default"] else ""} for r in out]
    emit_rows(
        out if output == "json" else shown,
        (
            "task_queue",
            "build_id",
            "default",
            "backlog",
            "oldest_task_age_s",
            *(("open_workflows",) if opened is not None else ()),
        ),
        output,
    )


@builds.command("move")
@click.argument("workflow_id")
@click.argument("build_id", required=False)
@click.option("--unpin", is_flag=True, help="move the run to the unversioned workers")
@click.option("--request-id", default=None, help="idempotency key: a retry is applied once")
@click.pass_obj
def move(config: KafkaConfig, workflow_id: str, build_id: str | None, unpin: bool, request_id: str | None) -> None:
    """Move WORKFLOW_ID's open run to BUILD_ID (its waiting workflow task goes there at once)."""
    from kadence.topics import EngineClient
    from kadence.topics.builds import validate_build_id
    from kadence.topics.protocol import expect_ok
    from kadence.topics.records import new_id

    if (build_id is None) == (not unpin):
        raise click.UsageError("give a BUILD_ID or --unpin (not both)")
    try:
        validate_build_id(build_id, allow_none=True)
    except KadenceError as exc:
        raise click.BadParameter(str(exc), param_hint="BUILD_ID") from exc
    audit.warning("move of workflow %s to build %s requested from the CLI", workflow_id, build_id)

    async def run() -> dict[str, Any]:
        engine = EngineClient(config)
        try:
            reply = await engine.request(
                workflow_id,
                "UpdateWorkflowBuild",
                {"build_id": build_id, "identity": config.client_id},
                request_id=request_id or new_id(),
            )
            return expect_ok(reply, workflow_id, what=f"move of {workflow_id!r} rejected")
        finally:
            engine.close()

    try:
        reply = asyncio.run(run())
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo(json.dumps({"workflow_id": workflow_id, "run_id": reply["run_id"], "build_id": build_id}))
