"""``python -m bench [--only NAME ...]``: run the benchmark scenarios against
``KADENCE_KAFKA_BOOTSTRAP`` and write ``bench/results/<timestamp>.json``, ``latest.json`` and a
chart. ``KADENCE_BENCH_SECONDS`` (default 60) is the measured duration of each scenario."""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import logging
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

from .common import BenchError, Context, Settings, console, make_progress
from .scenarios import (
    activity_results,
    broker_recovery,
    broker_warmup,
    capacity,
    cli,
    concurrency,
    eager_activities,
    fairness,
    gateway,
    hops,
    hot_workflow,
    latency,
    payloads,
    peers,
    projections,
    raw_kafka,
    rebalance,
    recovery,
    replication,
    requests,
    restore_scale,
    scale,
    schedules,
    streams,
    throughput,
    timers,
    tracing,
)
from .scenarios import console as console_pages

#: in run order (latency uses throughput's result for its half-load rate; raw_kafka uses the
#: processor's measured batch size)
SCENARIOS = {
    "throughput": throughput.run,
    "latency": latency.run,
    "hops": hops.run,
    "timers": timers.run,
    "raw_kafka": raw_kafka.run,
    "scale": scale.run,
    "recovery": recovery.run,
    "broker_recovery": broker_recovery.run,
    "replication": replication.run,
    "rebalance": rebalance.run,
    "capacity": capacity.run,
    "restore_scale": restore_scale.run,
    "gateway": gateway.run,
    "projections": projections.run,
    "activity_results": activity_results.run,
    "tracing": tracing.run,
    "payloads": payloads.run,
    "console": console_pages.run,
    "hot_workflow": hot_workflow.run,
    "peers": peers.run,
    "requests": requests.run,
    "eager_activities": eager_activities.run,
    "cli": cli.run,
    "concurrency": concurrency.run,
    "fairness": fairness.run,
    "schedules": schedules.run,
    "streams": streams.run,
}


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--only", action="append", choices=list(SCENARIOS), help="run only these scenarios (repeatable)")
    ap.add_argument("--no-chart", action="store_true", help="skip the PNG chart")
    ap.add_argument(
        "--compare",
        nargs=2,
        metavar=("A.json", "B.json"),
        type=Path,
        help="print the figures of two result files and their ratios (B / A), then exit",
    )
    return ap.parse_args(argv)


async def run_all(ctx: Context, names: list[str]) -> dict:
    raw: dict = {}
    with ctx.progress:
        # always first, whatever --only says: every scenario is measured against a warm broker
        raw["broker_warmup"] = await broker_warmup.run(ctx)
        for name in names:
            t0 = time.monotonic()
            try:
                raw[name] = await SCENARIOS[name](ctx)
            except BenchError as exc:
                console.print(f"[red]{name} failed:[/] {exc}")
                raw[name] = {"error": str(exc)}
            except Exception as exc:  # noqa: BLE001 - one broken scenario must not lose the others
                console.print(f"[red]{name} crashed:[/] {type(exc).__name__}: {exc}")
                console.print(traceback.format_exc())
                raw[name] = {"error": f"{type(exc).__name__}: {exc}"}
            if isinstance(raw[name], dict):
                raw[name]["scenario_seconds"] = round(time.monotonic() - t0, 1)
            ctx.results[name] = raw[name]
    return raw


async def _dumping_tasks(coro):
    """``coro``, with ``kill -USR2`` printing every asyncio task's stack to stderr."""

    def dump() -> None:
        for task in asyncio.all_tasks():
            task.print_stack(file=sys.stderr)

    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, dump)
    return await coro


def main(argv=None) -> int:
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1`: where a hung scenario sits
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.compare:
        from . import report

        for path in args.compare:
            if not path.is_file():
                console.print(f"[red]error:[/] {path}: no such result file")
                return 2
        report.print_compare(*args.compare)
        return 0
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = Settings.from_env()
    except BenchError as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    settings.logdir = Path(tempfile.mkdtemp(prefix="kadence-bench-"))
    names = [n for n in SCENARIOS if not args.only or n in args.only]
    console.print(
        f"Kadence bench: {', '.join(names)}; {settings.seconds:g} s per measurement after "
        f"{settings.warmup:g} s warm-up; broker {settings.bootstrap}; process logs in {settings.logdir}"
    )
    from . import report

    ctx = Context(settings=settings, progress=make_progress())
    started = time.time()
    try:
        raw = asyncio.run(_dumping_tasks(run_all(ctx, names)))
    except KeyboardInterrupt:
        console.print("[red]interrupted[/]")
        return 130
    doc = report.build(settings, raw, started)
    paths = report.write(doc, chart=not args.no_chart)
    report.print_table(doc)
    console.print(
        "wrote " + ", ".join(str(p.relative_to(Path.cwd())) if p.is_relative_to(Path.cwd()) else str(p) for p in paths)
    )
    return 1 if any(isinstance(v, dict) and "error" in v for v in raw.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
