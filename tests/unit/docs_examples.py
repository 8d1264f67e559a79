"""Run one of the guide's examples in ``docs/examples`` as a reader would: a fresh interpreter, no
broker (the bootstrap points at a closed port, so an example that needed one would fail)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NO_BROKER = {"PATH": "/usr/bin:/bin", "KADENCE_KAFKA_BOOTSTRAP": "127.0.0.1:1"}


def run_example(name: str, *, timeout: float = 60) -> str:
    """Run ``docs/examples/<name>`` and return its stdout; fail with its stderr if it exits non-zero."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "examples" / name)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=NO_BROKER,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout
