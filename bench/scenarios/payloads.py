"""Scenario: what typed payloads and a payload codec cost (issue 18: within 10 % of plain JSON).

The same three activities, passing the same fields (an int, a string, a datetime, a list of two
strings), back to back: ``typed`` as a dataclass that is validated into its type on every
receipt (the activity's argument, its result in the workflow, the workflow's result in the
client), ``dict`` as an untyped dict, as before typed payloads existed, and ``codec`` as the dict
with every payload encrypted (AES-256-GCM, ``bench.workloads.BenchCipher``) by the client and the
worker (``KADENCE_CODEC``). An engine per mode and round; each mode runs twice, alternating, at
``KADENCE_BENCH_PAYLOAD_CONCURRENCY`` (default 256) in flight and at one in flight;
``KADENCE_BENCH_PAYLOAD_SECONDS`` (default 20) is each window's length."""

from __future__ import annotations

import os

from ..common import Context, alternating_summary
from ..engine import engine
from ..workloads import BenchCipher
from .throughput import window

MODES = {"dict": "three_dict", "typed": "three_typed", "codec": "three_dict"}
CODEC = "bench.workloads:BenchCipher"


async def run(ctx: Context) -> dict:
    seconds = float(os.environ.get("KADENCE_BENCH_PAYLOAD_SECONDS", "20"))
    busy = int(os.environ.get("KADENCE_BENCH_PAYLOAD_CONCURRENCY", "256"))
    task = ctx.task("payloads")
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    for round_ in range(2):
        for mode, shape in MODES.items():
            coded = mode == "codec"
            async with engine(
                ctx,
                f"payloads-{mode}-{round_}",
                worker_env={"KADENCE_CODEC": CODEC} if coded else None,
                codec=BenchCipher() if coded else None,
            ) as eng:
                light = await window(ctx, task, eng, shape, 1, seconds, f"payloads {mode} light")
                heavy = await window(ctx, task, eng, shape, busy, seconds, f"payloads {mode} x{busy}")
            runs[mode].append(
                {
                    "light_wf_per_s": light["wf_per_s"],
                    "busy_wf_per_s": heavy["wf_per_s"],
                    "busy_cpu_percent": heavy["cpu_percent_of_core"],
                    "errors": light.get("errors", 0) + heavy.get("errors", 0),
                }
            )
    mean, ratios = alternating_summary(runs, ("light_wf_per_s", "busy_wf_per_s"), "dict")
    typed, coded = ratios["typed"], ratios["codec"]
    ctx.update(
        task,
        f"[green]over plain dict payloads: typed light {typed['light_wf_per_s']}, x{busy} "
        f"{typed['busy_wf_per_s']}; codec light {coded['light_wf_per_s']}, x{busy} {coded['busy_wf_per_s']}[/]",
    )
    return {"runs": runs, "mean": mean, "over_dict": ratios, "concurrency": busy, "window_s": seconds}
