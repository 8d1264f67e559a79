"""The soak campaign behind ``make chaos`` (issue 15): the chaos suite over many seeds, starved.

For each seed it starts one CPU-burner process per core, runs
``tests/faults/test_chaos.py::test_chaos_load_with_faults_keeps_every_invariant`` with that seed
(a fresh broker of the test's own, Redis from the dev stack), stops the burners, and prints one
progress line. At the end it prints the totals and writes every seed's fault plan and findings to
``tests/faults/results/chaos-<UTC time>.json``. Exit status 1 if any seed failed.

    make chaos                                   # 20 random seeds
    CHAOS_SEEDS=5 make chaos                     # 5 seeds
    CHAOS_SEED_LIST=372027720,17 make chaos      # these seeds first, then random ones up to CHAOS_SEEDS
    CHAOS_BURNERS=0 make chaos                   # no starvation (default: one burner per core)
    CHAOS_CLUSTER=1 CHAOS_SEEDS=5 make chaos     # on a three-node cluster, with its faults (leader
                                                 # kill, broker pause, rolling restart, a node lost,
                                                 # controller kill); 150 s chaos phases
    KADENCE_CHAOS_SECONDS=300 make chaos         # longer chaos phases (more workflows per seed)

Runs under ``scripts/devstack.py run`` (``make chaos`` does that), which provides Redis.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "tests" / "faults" / "results"
TEST = "tests/faults/test_chaos.py::test_chaos_load_with_faults_keeps_every_invariant"
#: CHAOS_CLUSTER=1: the suite on a three-node cluster (RF 3, min ISR 2) with the cluster's faults
CLUSTER_TEST = "tests/faults/test_chaos.py::test_chaos_on_a_replicated_cluster_keeps_every_invariant"


def _burn() -> None:  # pragma: no cover - runs in a child process until terminated
    os.nice(0)
    while True:
        pass


class Burners:
    """``n`` busy-loop processes for the length of one seed's run (bounded: they die with us)."""

    def __init__(self, n: int):
        self.n = n
        self.procs: list[multiprocessing.Process] = []

    def __enter__(self):
        for _ in range(self.n):
            proc = multiprocessing.Process(target=_burn, daemon=True)
            proc.start()
            self.procs.append(proc)
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.join(5)
        self.procs.clear()


def _seeds(count: int, listed: str) -> list[int]:
    seeds = [int(s) for s in listed.replace(" ", "").split(",") if s]
    rng = random.Random()
    while len(seeds) < count:
        seeds.append(rng.randrange(2**32))
    return seeds


def _load_avg() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return -1.0


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL whatever is left of a seed's process group (nothing, when pytest ended well)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_seed(seed: int, burners: int, workdir: Path, test: str = TEST) -> dict:
    result_path = workdir / f"seed-{seed}.json"
    logdir = workdir / f"logs-{seed}"
    logdir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "KADENCE_CHAOS_SEED": str(seed),
        "KADENCE_CHAOS_RESULT": str(result_path),
        "KADENCE_CHAOS_LOGDIR": str(logdir),
    }
    t0 = time.monotonic()
    with Burners(burners), open(logdir / "pytest.log", "w") as out:
        loads = []
        # its own process group: when the campaign is stopped, the run's components and broker go
        # with it (a killed campaign left them running, starving the next one)
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", test],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            while proc.poll() is None:
                time.sleep(5)
                loads.append(_load_avg())
        finally:
            _kill_group(proc)
    record = json.loads(result_path.read_text()) if result_path.exists() else {"seed": seed}
    record.update(
        passed=proc.returncode == 0,
        pytest_status=proc.returncode,
        wall_s=round(time.monotonic() - t0, 1),
        burners=burners,
        load_avg_max=max(loads, default=-1.0),
        load_avg_mean=round(sum(loads) / len(loads), 1) if loads else -1.0,
    )
    if not record["passed"]:
        record["logdir"] = str(logdir)
        tail = (logdir / "pytest.log").read_text(errors="replace").splitlines()
        record["failure"] = [line for line in tail if line.startswith(("E ", "FAILED", "chaos: violations"))][:20]
    return record


def _totals(done: list[dict]) -> dict:
    """The campaign's totals. A seed that failed before its check ran has violations "unknown":
    it counts as failed and unchecked, not as one with violations."""
    violations = {r["seed"]: r.get("violations", "unknown") for r in done}
    return {
        "seeds": len(done),
        "passed": sum(r["passed"] for r in done),
        "workflows": sum(r.get("counts", {}).get("workflows_started", 0) for r in done),
        "events": sum(r.get("events", 0) for r in done),
        "faults": sum(len(r.get("faults", [])) for r in done),
        "seeds_failed": [r["seed"] for r in done if not r["passed"]],
        "seeds_with_violations": [seed for seed, v in violations.items() if v not in ("none", "unknown")],
        "seeds_unchecked": [seed for seed, v in violations.items() if v == "unknown"],
    }


def main(argv: list[str]) -> int:
    if argv:  # configured by the environment only; `--help` (or anything else) prints how
        print(__doc__.strip())
        return 0 if argv[0] in ("-h", "--help") else 2
    # stopped (SIGTERM): unwind, so the running seed's process group is killed on the way out
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not os.environ.get("KADENCE_REDIS_URL"):
        print(
            "chaos: KADENCE_REDIS_URL is not set: run it under scripts/devstack.py run (make chaos does)",
            file=sys.stderr,
        )
        return 2
    count = int(os.environ.get("CHAOS_SEEDS", "20"))
    cluster = os.environ.get("CHAOS_CLUSTER", "") not in ("", "0")
    test = CLUSTER_TEST if cluster else TEST
    burners = int(os.environ.get("CHAOS_BURNERS", str(os.cpu_count() or 1)))
    seeds = _seeds(count, os.environ.get("CHAOS_SEED_LIST", ""))
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out_path = RESULTS / f"chaos-{'cluster-' if cluster else ''}{stamp}.json"
    workdir = Path(tempfile.mkdtemp(prefix="kadence-chaos-"))
    print(
        f"chaos campaign: {len(seeds)} seeds{' on a three-node cluster' if cluster else ''}, {burners} CPU burners, "
        f"results in {out_path}, logs in {workdir}",
        flush=True,
    )
    campaign = {
        "started": stamp,
        "cpus": os.cpu_count(),
        "burners": burners,
        "chaos_seconds": float(os.environ.get("KADENCE_CHAOS_SECONDS", "150" if cluster else "80")),
        "cluster": cluster,
        "seeds": [],
    }
    for i, seed in enumerate(seeds, 1):
        record = run_seed(seed, burners, workdir, test)
        campaign["seeds"].append(record)
        out_path.write_text(json.dumps(campaign, indent=1))
        started = record.get("counts", {}).get("workflows_started", 0)
        status = "ok" if record["passed"] else "FAILED"
        print(
            f"chaos: seed {i}/{len(seeds)} {seed}: {status}, {started} workflows, {record.get('events', 0)} events, "
            f"{len(record.get('faults', []))} faults, violations: {record.get('violations', 'unknown')}, "
            f"{record['wall_s']:.0f} s, load avg max {record['load_avg_max']:.1f}",
            flush=True,
        )
        if not record["passed"]:
            print("  " + "\n  ".join(record.get("failure", [])) + f"\n  logs: {record.get('logdir')}", flush=True)
    done = campaign["seeds"]
    totals = _totals(done)
    campaign["totals"] = totals
    out_path.write_text(json.dumps(campaign, indent=1))
    print(
        f"chaos campaign: {totals['passed']}/{totals['seeds']} seeds passed, {totals['workflows']} workflows, "
        f"{totals['events']} history events, {totals['faults']} faults; seeds with violations: "
        f"{totals['seeds_with_violations'] or 'none'}; failed before the check: {totals['seeds_unchecked'] or 'none'}; "
        f"results in {out_path}",
        flush=True,
    )
    return 0 if totals["passed"] == totals["seeds"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
