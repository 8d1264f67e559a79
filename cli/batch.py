"""``kadence batch``: signal, cancel, terminate, pause, unpause or reset every run a visibility
filter matches, server-side and resumable (``kadence.operations.batch``), and its worker."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kadence.readmodels.keys import RUN_STATUSES
from kadence.topics import KadenceError, KafkaConfig

from .projections import _REDIS_URL, parse_time_ms
from .serving import serve_worker

if TYPE_CHECKING:
    from kadence import WorkflowHandle
    from kadence.operations import BatchRequest

_F = TypeVar("_F", bound=Callable[..., Any])

__all__ = ["batch"]


@click.group()
def batch() -> None:
    """Act on every run a filter matches (server-side, resumable, each run acted on once)."""


def _filters(fn: _F) -> _F:
    for opt in reversed(
        [
            click.option("--type", "workflow_type", default=None, help="workflow type"),
            click.option("--status", type=click.Choice(RUN_STATUSES), default=None),
            click.option("--search", multiple=True, metavar="KEY=VALUE", help="search attribute (repeatable)"),
            click.option("--paused/--not-paused", default=None, help="only paused runs, or only runs not paused"),
            click.option("--since", default=None, help="started at or after (ISO-8601, epoch ms, or 15m/2h/7d ago)"),
            click.option("--until", default=None, help="started at or before"),
            click.option("--reason", default="", help="recorded with each run's command"),
            click.option(
                "--id",
                "batch_id",
                default=None,
                help="the batch's ID (default: batch-<random>); starting "
                "the same ID again is answered with the first batch",
            ),
            click.option("--page-size", type=click.IntRange(1, 1000), default=200, show_default=True),
            click.option("--wait/--no-wait", default=False, help="show the progress until the batch ends"),
        ]
    ):
        fn = opt(fn)
    return fn


def _request(operation: str, o: dict[str, Any], **extra: Any) -> BatchRequest:
    from kadence.operations import BatchFilter, BatchRequest

    search = {}
    for item in o["search"]:
        if "=" not in item:
            raise click.BadParameter(f"{item!r}: use KEY=VALUE", param_hint="--search")
        k, v = item.split("=", 1)
        search[k] = v
    f = BatchFilter(
        workflow_type=o["workflow_type"],
        status=o["status"],
        search=search,
        paused=o["paused"],
        start_from_ms=parse_time_ms(o["since"]),
        start_to_ms=parse_time_ms(o["until"]),
    )
    req = BatchRequest(operation=operation, filter=f, reason=o["reason"], page_size=o["page_size"], **extra)
    try:
        req.check()
    except KadenceError as exc:
        raise click.UsageError(str(exc)) from exc
    return req


def _line(p: dict[str, Any]) -> str:
    total = "?" if p["total"] is None else p["total"]
    state = "done" if p["finished"] else "running"
    return f"{p['operation']}: {p['done']}/{total} runs, {p['succeeded']} ok, {p['failed']} failed ({state})"


async def _progress(handle: WorkflowHandle) -> dict[str, Any]:
    from dataclasses import asdict

    from kadence.operations import BatchProgress

    return asdict(await handle.query("progress", result_type=BatchProgress))


def _start(config: KafkaConfig, operation: str, o: dict[str, Any], **extra: Any) -> None:
    from kadence import Client
    from kadence.operations import BATCH_TASK_QUEUE, Batch

    req = _request(operation, o, **extra)
    batch_id = o["batch_id"] or f"batch-{uuid.uuid4().hex[:12]}"

    async def run() -> int:
        client = await Client.connect(config=config)
        try:
            handle = await client.start_workflow(
                Batch, req, id=batch_id, task_queue=BATCH_TASK_QUEUE, request_id=f"start-{batch_id}"
            )
            click.echo(
                f"batch {batch_id} started: {operation} of the runs matching the filter "
                f"(progress: kadence batch status {batch_id})",
                err=True,
            )
            if not o["wait"]:
                click.echo(json.dumps({"batch_id": batch_id, "run_id": handle.run_id}))
                return 0
            tty = sys.stderr.isatty()
            while True:
                p = await _progress(handle)
                click.echo(("\r" if tty else "") + _line(p), err=True, nl=not tty)
                if p["finished"]:
                    break
                await asyncio.sleep(1.0)
            if tty:
                click.echo("", err=True)
            click.echo(json.dumps({"batch_id": batch_id, **p}, indent=2))
            return 1 if p["failed"] else 0
        finally:
            await client.close()

    try:
        sys.exit(asyncio.run(run()))
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


def _op(name: str, help_text: str) -> None:
    @batch.command(name, help=help_text)
    @_filters
    @click.pass_obj
    def cmd(config: KafkaConfig, /, **o: Any) -> None:
        logging_audit(name, o)
        _start(config, name, o)


def logging_audit(operation: str, o: dict[str, Any]) -> None:
    import logging

    logging.getLogger("kadence.audit").warning(
        "batch %s requested from the CLI (type=%s status=%s search=%s)",
        operation,
        o["workflow_type"],
        o["status"],
        list(o["search"]),
    )


_op("terminate", "End every matching run at once.")
_op("cancel", "Ask every matching run to cancel.")
_op("pause", "Pause every matching open run.")
_op("unpause", "Unpause every matching run.")
_op("reset", "Reset every matching run to its last completed workflow task (open runs are terminated).")


@batch.command("signal")
@click.argument("signal_name")
@click.option("--input", "input_json", default="[]", help="the signal's arguments as a JSON array")
@_filters
@click.pass_obj
def signal_cmd(config: KafkaConfig, /, signal_name: str, input_json: str, **o: Any) -> None:
    """Signal every matching run."""
    try:
        args = json.loads(input_json)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--input") from exc
    if not isinstance(args, list):
        raise click.BadParameter("a JSON array of arguments", param_hint="--input")
    logging_audit("signal", o)
    _start(config, "signal", o, signal_name=signal_name, signal_args=args)


@batch.command("status")
@click.argument("batch_id")
@click.pass_obj
def status(config: KafkaConfig, batch_id: str) -> None:
    """A batch's progress: runs done of the total, failures with their reasons."""
    from kadence import Client

    async def run() -> dict[str, Any]:
        client = await Client.connect(config=config)
        try:
            return await _progress(client.get_workflow_handle(batch_id))
        finally:
            await client.close()

    try:
        p = asyncio.run(run())
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo(_line(p), err=True)
    click.echo(json.dumps({"batch_id": batch_id, **p}, indent=2))


@batch.command("worker")
@_REDIS_URL
@click.pass_obj
def worker(config: KafkaConfig, redis_url: str) -> None:
    """Run the batches (the kadence.Batch workflow and its activities; needs the visibility
    projection's Redis). Until SIGTERM/SIGINT."""
    from kadence import Worker
    from kadence.operations import BATCH_TASK_QUEUE, Batch, batch_activities

    serve_worker(
        config,
        lambda client: Worker(
            client, task_queue=BATCH_TASK_QUEUE, workflows=[Batch], activities=batch_activities(client, redis_url)
        ),
    )
