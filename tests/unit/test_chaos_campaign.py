"""``make chaos`` (scripts/chaos.py): a stopped campaign takes its seed's processes with it."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _chaos():
    spec = importlib.util.spec_from_file_location("chaos_campaign", ROOT / "scripts" / "chaos.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by init) counts as gone
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_killing_a_seed_kills_the_components_its_pytest_started(tmp_path):
    pidfile = tmp_path / "grandchild"
    # a stand-in for pytest: starts a long-lived child (a component, the broker) and waits
    script = (
        f"import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
        f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(600)"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text()):
        assert time.monotonic() < deadline, "the stand-in never started its child"
        time.sleep(0.05)
    grandchild = int(pidfile.read_text())
    assert _alive(grandchild)
    _chaos()._kill_group(proc)
    assert proc.returncode is not None
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), "the component outlived its seed"


def test_totals_tell_a_failed_seed_from_one_with_violations():
    chaos = _chaos()
    done = [
        {
            "seed": 1,
            "passed": True,
            "violations": "none",
            "counts": {"workflows_started": 520},
            "events": 9,
            "faults": [{}, {}],
        },
        {"seed": 2, "passed": False, "violations": "history: 2"},
        {"seed": 3, "passed": False},
    ]  # failed before its check wrote a result
    totals = chaos._totals(done)
    assert totals == {
        "seeds": 3,
        "passed": 1,
        "workflows": 520,
        "events": 9,
        "faults": 2,
        "seeds_failed": [2, 3],
        "seeds_with_violations": [2],
        "seeds_unchecked": [3],
    }


def test_listed_seeds_come_first():
    seeds = _chaos()._seeds(3, "7, 9")
    assert seeds[:2] == [7, 9] and len(seeds) == 3
