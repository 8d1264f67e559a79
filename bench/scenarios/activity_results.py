"""Scenario: what committing activity results with their offsets costs (decision 0032).

The same 3-activity workflow, back to back in one run, with the worker's activity results
committed in transactions (``KADENCE_WORKER_TXN_RESULTS=1``, the default) and with offsets
auto-committed after delivery (``0``): throughput at one workflow in flight (light load: each
activity waits for its result's transaction) and at ``KADENCE_BENCH_TXN_CONCURRENCY`` (default
256). Each mode runs twice, alternating (off, on, off, on), so drift shows as a spread rather
than as a difference. ``KADENCE_BENCH_TXN_SECONDS`` (default 15) is each window's length."""

from __future__ import annotations

import os

from ..common import Context, alternating_summary
from ..engine import engine
from .throughput import window

MODES = {"auto_commit": "0", "transactional": "1"}


async def run(ctx: Context) -> dict:
    seconds = float(os.environ.get("KADENCE_BENCH_TXN_SECONDS", "15"))
    busy = int(os.environ.get("KADENCE_BENCH_TXN_CONCURRENCY", "256"))
    task = ctx.task("activity_results")
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    for round_ in range(2):
        for mode, value in MODES.items():
            async with engine(ctx, f"txr-{mode}-{round_}", worker_env={"KADENCE_WORKER_TXN_RESULTS": value}) as eng:
                light = await window(ctx, task, eng, "three_activity", 1, seconds, f"{mode} light")
                heavy = await window(ctx, task, eng, "three_activity", busy, seconds, f"{mode} x{busy}")
            runs[mode].append(
                {
                    "light_wf_per_s": light["wf_per_s"],
                    "busy_wf_per_s": heavy["wf_per_s"],
                    "light_ms_per_wf": round(1000 / light["wf_per_s"], 2) if light["wf_per_s"] else None,
                    "busy_cpu_percent": heavy["cpu_percent_of_core"],
                }
            )
    mean, ratios = alternating_summary(runs, ("light_wf_per_s", "busy_wf_per_s"), "auto_commit")
    ratio = ratios["transactional"]
    ctx.update(
        task, f"[green]transactional/auto-commit: light {ratio['light_wf_per_s']}, x{busy} {ratio['busy_wf_per_s']}[/]"
    )
    return {
        "runs": runs,
        "mean": mean,
        "transactional_over_auto_commit": ratio,
        "concurrency": busy,
        "window_s": seconds,
    }
