"""``kadence replay``: histories replayed against workflow code, from files or live from the
history topic; with ``--follow``, a shadow replay of a candidate build (docs/upgrading.md)."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import click

from kadence.topics import KafkaConfig

from .definitions import load_definitions

__all__ = ["replay"]


@click.command()
@click.option("--module", "module_name", required=True, help="module whose WORKFLOWS to replay against")
@click.option(
    "--from-topic",
    is_flag=True,
    help="replay live histories from the history topic: the latest --limit runs of each type, open ones included",
)
@click.option(
    "--limit", default=1000, show_default=True, type=click.IntRange(min=1), help="with --from-topic: runs per type"
)
@click.option(
    "--follow",
    is_flag=True,
    help="with --from-topic: then replay every run again as its history grows, until Ctrl-C (shadow replay)",
)
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.pass_obj
def replay(
    config: KafkaConfig, module_name: str, from_topic: bool, limit: int, follow: bool, files: tuple[str, ...]
) -> None:
    """Replay histories against workflow code; exit 1 at any non-determinism (for CI, and as the
    shadow replay of a candidate build against live histories before it is promoted)."""
    from kadence import KadenceError as Err
    from kadence import NonDeterminismError, Replayer

    if follow and not from_topic:
        raise click.UsageError("--follow goes with --from-topic")
    workflows, _ = load_definitions(module_name)
    replayer = Replayer(workflows=workflows)
    results, failed, file_failures = [], 0, 0

    def show(r: Any) -> None:
        if r.ok:
            click.echo(f"ok   {r.workflow_type} {r.workflow_id} {r.run_id} ({r.events} events)")
        else:
            click.echo(f"FAIL {r.workflow_type} {r.workflow_id} {r.run_id}: {r.error}", err=True)

    try:
        for path in files:
            try:
                results.append(replayer.replay_file(path))
            except NonDeterminismError as exc:
                click.echo(f"FAIL {path}: {exc}", err=True)
                failed += 1
                file_failures += 1
        if from_topic:
            from kadence._shadow import ShadowReplay

            shadow = ShadowReplay(config, replayer, per_type=limit)
            results.extend(shadow.sample())
    except Err as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    for r in results:
        show(r)
        failed += 0 if r.ok else 1
    click.echo(f"{len(results) + file_failures} histories replayed, {failed} failed")
    if not follow:
        sys.exit(1 if failed else 0)
    _follow_shadow(shadow, show, failed)


def _follow_shadow(shadow: Any, show: Callable[[Any], None], failed_before: int) -> None:
    """``kadence replay --from-topic --follow``: every run again as its history grows; a summary
    per workflow type once a minute and at the end; exit 1 if any run failed, ever."""
    import threading

    from kadence import KadenceError as Err

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    click.echo("following the history topic (Ctrl-C to stop)")
    state = {"next": time.monotonic() + 60.0}

    def summary() -> str:
        return "; ".join(
            f"{t}: {ok} replays passed, {bad} runs failed" for t, (ok, bad) in sorted(shadow.per_type_counts.items())
        )

    def on_result(r: Any) -> None:
        show(r)
        if time.monotonic() >= state["next"]:
            click.echo(f"shadow replay: {summary()}")
            state["next"] = time.monotonic() + 60.0

    try:
        shadow.follow(on_result, stop)
    except Err as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo(f"shadow replay: {summary() or 'nothing replayed'}")
    sys.exit(1 if failed_before or shadow.failed else 0)
