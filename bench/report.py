"""The result document (``latest.json``), the summary table and the chart."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import confluent_kafka
import psutil
from rich.table import Table

from .common import RESULTS, Settings, console

#: the targets of issue 7: key -> (description, predicate on the document)
TARGETS = {
    "three_activity_wf_per_s": (
        "3-activity workflows >= 300 wf/s",
        lambda d: _get(d, "throughput_wf_per_s", "three_activity"),
        lambda v: v >= 300,
    ),
    "step_p50_light_ms": (
        "per-step p50 < 10 ms at light load",
        lambda d: _get(d, "step_latency_ms", "light", "p50"),
        lambda v: v < 10,
    ),
    "step_p99_light_ms": (
        "per-step p99 < 50 ms at light load",
        lambda d: _get(d, "step_latency_ms", "light", "p99"),
        lambda v: v < 50,
    ),
    "engine_to_raw_txn_ratio": (
        "engine read-process-write >= 0.5 x raw transactional loop",
        lambda d: d.get("engine_to_raw_txn_ratio"),
        lambda v: v >= 0.5,
    ),
    "bytes_per_idle_workflow": (
        "processor memory <= 2 KB per idle open workflow",
        lambda d: d.get("bytes_per_idle_workflow"),
        lambda v: v <= 2048,
    ),
    "timer_lateness_p99_ms": (
        "timer lateness p99 < 100 ms",
        lambda d: _get(d, "timer_lateness_ms", "p99"),
        lambda v: v < 100,
    ),
    # issue 19
    "light_three_activity_p50_ms": (
        "3-activity start->result p50 < 12 ms at one in flight",
        lambda d: _get(d, "light_start_to_result_ms", "three_activity", "p50"),
        lambda v: v < 12,
    ),
    "light_three_activity_p99_ms": (
        "3-activity start->result p99 < 30 ms at one in flight",
        lambda d: _get(d, "light_start_to_result_ms", "three_activity", "p99"),
        lambda v: v < 30,
    ),
    "light_one_activity_p50_ms": (
        "1-activity start->result p50 < 5 ms at one in flight",
        lambda d: _get(d, "light_start_to_result_ms", "one_activity", "p50"),
        lambda v: v < 5,
    ),
    "idle_engine_cpu_percent": (
        "idle engine processes < 2 % of a core in all",
        lambda d: _get(d, "idle_cpu_percent", "engine"),
        lambda v: v < 2,
    ),
    "light_cpu_ms_per_workflow": (
        "engine CPU per 3-activity workflow at one in flight < 10 ms",
        lambda d: _get(d, "cpu_ms_per_workflow", "light"),
        lambda v: v < 10,
    ),
    "three_activity_wf_per_s_600": (
        "3-activity workflows >= 600 wf/s at saturation",
        lambda d: _get(d, "throughput_wf_per_s", "three_activity"),
        lambda v: v >= 600,
    ),
    # issue 16
    "broker_recovery_first_commit_s_max": (
        "broker answering again -> first committed command < 10 s",
        lambda d: d.get("broker_recovery_first_commit_s_max"),
        lambda v: v < 10,
    ),
}


def _get(d, *path):
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def _num(v):
    if isinstance(v, (int, float)) and v == v:  # not NaN
        return v
    return None


def _idle(hops) -> dict:
    """% of a core while nothing runs, from the ``hops`` scenario's first variant: the engine's
    processes (processor, timer service, worker) in all, and the broker."""
    runs = _get(hops, "runs")
    if not isinstance(runs, dict) or not runs:
        return {"engine": None, "broker": None}
    idle = next(iter(runs.values()))[0].get("idle_cpu_percent") or {}
    engine = [
        v for k, v in idle.items() if k not in ("broker", "bench", "machine_busy", "stack") and _num(v) is not None
    ]
    return {"engine": round(sum(engine), 2) if engine else None, "broker": _num(idle.get("broker"))}


def _saturated_cpu(three) -> float | None:
    """Engine CPU ms per 3-activity workflow at the throughput run's best level (broker apart)."""
    usage, rate = _get(three, "cpu_percent_of_core"), _num(_get(three, "wf_per_s"))
    if not isinstance(usage, dict) or not rate:
        return None
    engine = sum(v for k, v in usage.items() if k not in ("broker", "bench", "machine_busy") and _num(v) is not None)
    return round(engine / 100 / rate * 1000, 2)


def machine() -> dict:
    cpu_model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "cpu_model": cpu_model,
        "memory": psutil.virtual_memory().total,
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "kafka_version": os.environ.get("KADENCE_KAFKA_VERSION"),
        "confluent_kafka": confluent_kafka.version()[0],
        "librdkafka": confluent_kafka.libversion()[0],
        "platform": platform.platform(),
    }


def code_version() -> dict:
    """Which Kadence code ran: where ``kadence`` was imported from, and the git commit there."""
    import subprocess

    import kadence

    where = Path(kadence.__file__).resolve().parent
    out = {"kadence_path": str(where), "commit": None, "dirty": None}
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], cwd=where, capture_output=True, text=True, timeout=10
        )
        if top.returncode == 0:
            out["commit"] = subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10
            ).stdout.strip()
            out["dirty"] = bool(
                subprocess.run(
                    ["git", "status", "--porcelain", "--untracked-files=no"],
                    cwd=where,
                    capture_output=True,
                    text=True,
                    timeout=10,
                ).stdout.strip()
            )
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def build(settings: Settings, raw: dict, started: float) -> dict:
    tp = raw.get("throughput", {}) if isinstance(raw.get("throughput"), dict) else {}
    lat = raw.get("latency", {}) if isinstance(raw.get("latency"), dict) else {}
    tim = raw.get("timers", {}) if isinstance(raw.get("timers"), dict) else {}
    rk = raw.get("raw_kafka", {}) if isinstance(raw.get("raw_kafka"), dict) else {}
    sc = raw.get("scale", {}) if isinstance(raw.get("scale"), dict) else {}
    rec = raw.get("recovery", {}) if isinstance(raw.get("recovery"), dict) else {}

    def pct(d):
        return (
            {k: _num(d.get(k)) for k in ("p50", "p95", "p99")}
            if isinstance(d, dict)
            else {"p50": None, "p95": None, "p99": None}
        )

    shapes = ("one_activity", "three_activity", "ten_step")
    engine_cmd = _num(_get(tp, "three_activity", "commands_per_s"))
    raw_txn = _num(rk.get("txn_loop_msgs_per_s"))
    raw500 = _num(_get(rk, "txn_loop_batch500", "msgs_per_s"))
    doc = {
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "duration_s": round(time.time() - started, 1),
        "settings": {
            "seconds": settings.seconds,
            "warmup": settings.warmup,
            "partitions": settings.partitions,
            "concurrency_levels": settings.concurrency_levels,
            "workers": settings.workers,
            "timer_rate": settings.timer_rate,
            "idle_workflows": settings.idle_workflows,
        },
        "throughput_wf_per_s": {k: _num(_get(tp, k, "wf_per_s")) for k in shapes},
        "history_events_per_s": {k: _num(_get(tp, k, "history_events_per_s")) for k in shapes},
        "commands_per_s": {k: _num(_get(tp, k, "commands_per_s")) for k in shapes},
        "step_latency_ms": {"light": pct(lat.get("light")), "half_load": pct(lat.get("half_load"))},
        "timer_lateness_ms": {"p50": _num(tim.get("p50")), "p99": _num(tim.get("p99"))},
        "raw_kafka": {
            "roundtrip_ms_p50": _num(rk.get("roundtrip_ms_p50")),
            "txn_loop_msgs_per_s": raw_txn,
            "txn_loop_batch": _get(rk, "txn_loop", "batch"),
            "txn_loop_batch500_msgs_per_s": _num(_get(rk, "txn_loop_batch500", "msgs_per_s")),
        },
        "engine_to_raw_txn_ratio": round(engine_cmd / raw_txn, 3) if engine_cmd and raw_txn else None,
        # the same against the raw loop at the processor's largest batch (500): Kafka's ceiling
        "engine_to_raw_txn_ratio_batch500": round(engine_cmd / raw500, 3) if engine_cmd and raw500 else None,
        "bytes_per_idle_workflow": _num(sc.get("bytes_per_idle_workflow")),
        "restore_wf_per_s": _num(sc.get("restore_wf_per_s")),
        "recovery_s": _num(rec.get("recovery_s")),
        "broker_recovery_first_commit_s_max": _num(_get(raw, "broker_recovery", "first_commit_s_max")),
        **{
            k: _num((raw.get("gateway") if isinstance(raw.get("gateway"), dict) else {}).get(k))
            for k in (
                "gateway_starts_per_s",
                "gateway_start_p99_ms",
                "gateway_to_direct_ratio",
                "gateway_starts_per_s_p99_under_50ms",
            )
        },
        # issue 48 item 4: one ``kadence`` call, start to exit, over Kafka and over the gateway (``cli``)
        "cli_call_ms": {
            command: {path: _num(_get(raw, "cli", f"{command}_{path}_median_ms")) for path in ("kafka", "gateway")}
            for command in ("signal", "query", "describe")
        },
        # issue 19: one workflow at a time, tracing off (``latency``); idle (``hops``)
        "light_start_to_result_ms": {
            "three_activity": pct(_get(lat, "light", "start_to_close")),
            "one_activity": pct(_get(lat, "light_one_activity", "start_to_close")),
            "three_local": pct(_get(lat, "light_three_local", "start_to_close")),
        },
        "idle_cpu_percent": _idle(raw.get("hops")),
        "cpu_ms_per_workflow": {
            "light": _num(_get(lat, "light", "cpu_ms_per_workflow", "engine")),
            "light_broker": _num(_get(lat, "light", "cpu_ms_per_workflow", "broker")),
            "saturated": _saturated_cpu(_get(tp, "three_activity")),
        },
        "projection_rebuild_events_per_s": _num(_get(raw, "projections", "projection_rebuild_events_per_s")),
        "projection_lag_steady": _get(raw, "projections", "projection_lag_steady"),
        "machine": machine(),
        "code": code_version(),
        "details": raw,
    }
    doc["targets"] = {}
    for key, (text, get, ok) in TARGETS.items():
        value = _num(get(doc))
        doc["targets"][key] = {"target": text, "value": value, "met": None if value is None else bool(ok(value))}
    return doc


def write(doc: dict, *, chart: bool = True) -> list[Path]:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    text = json.dumps(doc, indent=2, default=str, allow_nan=False) + "\n"
    paths = [RESULTS / f"{stamp}.json", RESULTS / "latest.json"]
    for p in paths:
        p.write_text(text)
    if chart:
        try:
            paths.append(plot(doc, RESULTS / f"{stamp}.png"))
            latest_png = RESULTS / "latest.png"
            latest_png.write_bytes(paths[-1].read_bytes())
            paths.append(latest_png)
        except Exception as exc:  # noqa: BLE001 - the numbers matter more than the picture
            console.print(f"[yellow]chart not written: {exc}[/]")
    return paths


def _fmt(v, unit=""):
    if v is None:
        return "-"
    if isinstance(v, float):
        v = f"{v:,.1f}" if abs(v) >= 10 else f"{v:.2f}"
    else:
        v = f"{v:,}"
    return f"{v}{unit}"


def print_table(doc: dict) -> None:
    t = Table(title="Kadence bench", show_lines=False)
    t.add_column("measure")
    t.add_column("value", justify="right")
    t.add_column("target")
    tp, lat = doc["throughput_wf_per_s"], doc["step_latency_ms"]
    targets = doc["targets"]

    def mark(key):
        m = targets[key]["met"]
        return "" if m is None else ("[green]met[/]" if m else "[red]not met[/]")

    t.add_row("throughput 1-activity", _fmt(tp["one_activity"], " wf/s"), "")
    t.add_row(
        "throughput 3-activity",
        _fmt(tp["three_activity"], " wf/s"),
        ">= 300 " + mark("three_activity_wf_per_s") + ", >= 600 " + mark("three_activity_wf_per_s_600"),
    )
    t.add_row("throughput 10-step", _fmt(tp["ten_step"], " wf/s"), "")
    t.add_row("history events/s (3-activity)", _fmt(doc["history_events_per_s"]["three_activity"]), "")
    t.add_row("commands/s (3-activity)", _fmt(doc["commands_per_s"]["three_activity"]), "")
    for load in ("light", "half_load"):
        L = lat[load]
        t.add_row(
            f"step latency {load} p50/p95/p99",
            f"{_fmt(L['p50'])} / {_fmt(L['p95'])} / {_fmt(L['p99'])} ms",
            ("p50 < 10 " + mark("step_p50_light_ms") + ", p99 < 50 " + mark("step_p99_light_ms"))
            if load == "light"
            else "",
        )
    d = _get(doc, "details", "latency", "light", "dispatch") or {}
    t.add_row("dispatch light p50/p99", f"{_fmt(d.get('p50'))} / {_fmt(d.get('p99'))} ms", "")
    for shape, p50_key, p99_key, text in (
        ("three_activity", "light_three_activity_p50_ms", "light_three_activity_p99_ms", "p50 < 12 {}, p99 < 30 {}"),
        ("one_activity", "light_one_activity_p50_ms", None, "p50 < 5 {}"),
        ("three_local", None, None, "(3 local activities)"),
    ):
        e = _get(doc, "light_start_to_result_ms", shape) or {}
        t.add_row(
            f"{shape.replace('_', ' ')} start->result, one in flight p50/p99",
            f"{_fmt(e.get('p50'))} / {_fmt(e.get('p99'))} ms",
            text.format(mark(p50_key) if p50_key else "", mark(p99_key) if p99_key else ""),
        )
    cpu = doc.get("cpu_ms_per_workflow") or {}
    t.add_row(
        "engine CPU per workflow, one in flight / saturated",
        f"{_fmt(cpu.get('light'))} / {_fmt(cpu.get('saturated'))} ms",
        "< 10 " + mark("light_cpu_ms_per_workflow"),
    )
    idle = doc.get("idle_cpu_percent") or {}
    t.add_row(
        "idle: engine / broker",
        f"{_fmt(idle.get('engine'))} / {_fmt(idle.get('broker'))} % of a core",
        "engine < 2 " + mark("idle_engine_cpu_percent"),
    )
    tl = doc["timer_lateness_ms"]
    t.add_row(
        "timer lateness p50/p99",
        f"{_fmt(tl['p50'])} / {_fmt(tl['p99'])} ms",
        "p99 < 100 " + mark("timer_lateness_p99_ms"),
    )
    rk = doc["raw_kafka"]
    t.add_row("raw Kafka round trip p50", _fmt(rk["roundtrip_ms_p50"], " ms"), "")
    t.add_row(f"raw txn loop (batch {rk['txn_loop_batch']})", _fmt(rk["txn_loop_msgs_per_s"], " msg/s"), "")
    t.add_row("raw txn loop (batch 500)", _fmt(rk["txn_loop_batch500_msgs_per_s"], " msg/s"), "")
    t.add_row(
        "engine cmd/s / raw txn msg/s",
        _fmt(doc["engine_to_raw_txn_ratio"]),
        ">= 0.5 " + mark("engine_to_raw_txn_ratio"),
    )
    t.add_row("engine cmd/s / raw txn msg/s (batch 500)", _fmt(doc["engine_to_raw_txn_ratio_batch500"]), "")
    t.add_row(
        "bytes per idle workflow",
        _fmt(doc["bytes_per_idle_workflow"], " B"),
        "<= 2048 " + mark("bytes_per_idle_workflow"),
    )
    cli = doc.get("cli_call_ms") or {}
    t.add_row(
        "CLI call signal/query/describe, Kafka -> gateway",
        " / ".join(f"{_fmt(_get(cli, c, 'kafka'))}->{_fmt(_get(cli, c, 'gateway'))}" for c in cli) + " ms",
        "gateway < 200",
    )
    t.add_row("restore", _fmt(doc["restore_wf_per_s"], " wf/s"), "")
    t.add_row("recovery (SIGKILL -> first step)", _fmt(doc["recovery_s"], " s"), "")
    t.add_row(
        "broker back -> first commit (worst round)",
        _fmt(doc["broker_recovery_first_commit_s_max"], " s"),
        "< 10 " + mark("broker_recovery_first_commit_s_max"),
    )
    console.print(t)


def plot(doc: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    m = doc["machine"]
    fig.suptitle(
        f"Kadence bench {doc['timestamp']}  ({m['cores']} cores, Kafka {m['kafka_version']}, "
        f"{doc['settings']['seconds']:g} s per scenario)",
        fontsize=11,
    )

    ax = axes[0][0]
    tp = doc["throughput_wf_per_s"]
    names = list(tp)
    vals = [tp[k] or 0 for k in names]
    ax.bar(names, vals, color=["#4c72b0", "#55a868", "#c44e52"])
    ax.axhline(300, color="grey", ls="--", lw=1, label="target (3-activity)")
    ax.set_title("throughput (workflows/s, closed loop)")
    ax.legend(fontsize=8)
    for i, v in enumerate(vals):
        ax.text(i, v, f"{v:.0f}", ha="center", va="bottom", fontsize=8)

    ax = axes[0][1]
    lat = doc["step_latency_ms"]
    qs = ["p50", "p95", "p99"]
    width = 0.38
    for j, load in enumerate(("light", "half_load")):
        vals = [lat[load][q] or 0 for q in qs]
        ax.bar([i + (j - 0.5) * width for i in range(3)], vals, width, label=load)
    ax.set_xticks(range(3), qs)
    ax.axhline(10, color="grey", ls=":", lw=1)
    ax.axhline(50, color="grey", ls="--", lw=1)
    ax.set_title("step latency, ms (activity completed -> next scheduled)")
    ax.legend(fontsize=8)

    ax = axes[1][0]
    tl = doc["timer_lateness_ms"]
    vals = [tl["p50"] or 0, tl["p99"] or 0]
    ax.bar(["p50", "p99"], vals, color="#8172b2")
    ax.axhline(100, color="grey", ls="--", lw=1, label="target p99")
    ax.set_title(f"timer lateness, ms ({doc['settings']['timer_rate']:g} timers/s)")
    ax.legend(fontsize=8)

    ax = axes[1][1]
    rk = doc["raw_kafka"]
    cmd = doc["commands_per_s"]["three_activity"] or 0
    vals = [cmd, rk["txn_loop_msgs_per_s"] or 0, rk["txn_loop_batch500_msgs_per_s"] or 0]
    ax.bar(
        ["engine cmd/s", f"raw txn loop\n(batch {rk['txn_loop_batch']})", "raw txn loop\n(batch 500)"],
        vals,
        color=["#4c72b0", "#937860", "#da8bc3"],
    )
    ax.set_title("records/s through a read-process-write loop")
    for i, v in enumerate(vals):
        ax.text(i, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=8)

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _flatten(d, prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif _num(d) is not None and not isinstance(d, bool):
        out[prefix] = d
    return out


#: the figures ``--compare`` prints (the document's summary, not its details)
COMPARED = (
    "throughput_wf_per_s",
    "commands_per_s",
    "step_latency_ms",
    "light_start_to_result_ms",
    "cpu_ms_per_workflow",
    "idle_cpu_percent",
    "timer_lateness_ms",
    "raw_kafka",
    "engine_to_raw_txn_ratio",
    "restore_wf_per_s",
    "recovery_s",
    "gateway_starts_per_s",
    "gateway_start_p99_ms",
    "cli_call_ms",
)


def compare(a_path: Path, b_path: Path) -> dict[str, tuple[float, float, float | None]]:
    """Per figure both files hold: (a, b, b / a). Figures from separate runs: the ratio says as
    much as the two runs' conditions were alike (back to back on one machine, at best)."""
    a, b = (json.loads(Path(p).read_text()) for p in (a_path, b_path))
    fa = _flatten({k: a.get(k) for k in COMPARED})
    fb = _flatten({k: b.get(k) for k in COMPARED})
    return {k: (fa[k], fb[k], round(fb[k] / fa[k], 3) if fa[k] else None) for k in fa if k in fb}


def print_compare(a_path: Path, b_path: Path) -> None:
    t = Table(title=f"{Path(b_path).name} / {Path(a_path).name}")
    t.add_column("figure", no_wrap=True, min_width=40)
    t.add_column(Path(a_path).name, justify="right")
    t.add_column(Path(b_path).name, justify="right")
    t.add_column("ratio", justify="right")
    for key, (va, vb, ratio) in compare(a_path, b_path).items():
        t.add_row(key, _fmt(va), _fmt(vb), _fmt(ratio))
    console.print(t)
