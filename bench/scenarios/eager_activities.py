"""Scenario ``eager_activities`` (issue 45 item 2, decision 0054): the 3-activity workflow with
the worker's eager activities off and on, in alternating rounds (off, on, off, on;
``KADENCE_BENCH_EAGER_ROUNDS`` pairs, default 2), each round a fresh engine whose worker
processes run with ``KADENCE_WORKER_EAGER_ACTIVITIES`` 0 or 1. Per round and level (1, 8 and 512
in flight): start -> result, workflows per second, the broker's requests per workflow by API
key and the CPU per workflow of every process (``requests._level``). Reported: each round, the
mean per mode, and on/off ratios paired by round."""

from __future__ import annotations

import os

from .. import workloads
from ..broker_requests import BrokerRequests
from ..common import Context, paired_ratios
from ..engine import engine
from .requests import LEVELS, _level

MODES = {"off": "0", "on": "1"}


def _flat(level: dict) -> dict:
    req = level["requests_per_workflow"]
    return {
        "p50_ms": level["start_to_close"]["p50"],
        "p99_ms": level["start_to_close"]["p99"],
        "wf_per_s": level["wf_per_s"],
        "requests": req.get("all") if isinstance(req, dict) else None,
        "cpu_ms": level["cpu_ms_per_workflow"].get("all"),
        "broker_cpu_ms": level["cpu_ms_per_workflow"].get("broker"),
    }


async def run(ctx: Context) -> dict:
    rounds = int(os.environ.get("KADENCE_BENCH_EAGER_ROUNDS", "2"))
    task = ctx.task("eager_activities")
    meter = BrokerRequests()
    if not meter.available:
        return {"error": "no KADENCE_BROKER_JMX_PORT: run under scripts/devstack.py (make bench)"}
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    for round_ in range(rounds):
        for mode, value in MODES.items():
            env = {"KADENCE_WORKER_EAGER_ACTIVITIES": value}
            async with engine(ctx, f"eager-act-{mode}-{round_}", worker_env=env) as eng:
                levels = {}
                for n in LEVELS:
                    levels[n] = await _level(
                        ctx,
                        task,
                        eng,
                        meter,
                        workloads.ThreeActivities,
                        n,
                        f"{mode} round {round_ + 1}, {n} in flight",
                        False,
                    )
            runs[mode].append(
                {"levels": levels, **{f"{k}_{n}": v for n, lv in levels.items() for k, v in _flat(lv).items()}}
            )
    keys = [k for k in runs["off"][0] if k != "levels"]
    ratios = {k: paired_ratios(runs, k, "off").get("on") for k in keys}
    mean = {
        m: {
            k: round(sum(r[k] for r in rs if r[k] is not None) / max(1, sum(r[k] is not None for r in rs)), 2)
            for k in keys
        }
        for m, rs in runs.items()
    }
    p50 = ratios.get("p50_ms_1") or {}
    ctx.update(task, f"[green]eager activities on/off at 1 in flight: p50 x{p50.get('mean')}[/]")
    return {"runs": runs, "mean": mean, "on_over_off": ratios, "rounds": rounds}
