"""docs/testing.md's example, docs/examples/test_payment_saga.py, passes as the page says to run
it (``pytest docs/examples/test_payment_saga.py``), with no broker."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_payment_saga_example_tests_pass_without_a_broker():
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "docs/examples/test_payment_saga.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "KADENCE_KAFKA_BOOTSTRAP": "127.0.0.1:1"},
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "5 passed" in out.stdout
