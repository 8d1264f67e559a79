"""docs/examples/upgrade_sample.sh (the sample's upgrade path in docs/upgrading.md) runs as written."""

import os
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_sample_upgrade_runbook_moves_new_orders_to_v2_and_drains_v1(kafka_bootstrap):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "KADENCE_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "METRICS_PORT": str(port),
        "KADENCE_NAMESPACE": f"upgrade{uuid.uuid4().hex[:6]}",
        "KADENCE": f"{sys.executable} -m kadence.cli",
    }
    out = subprocess.run(
        ["bash", str(ROOT / "docs/examples/upgrade_sample.sh")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert 'order-1 ran on "build_id": "v1", order-2 on "build_id": "v2"' in out.stdout
    assert '"build": "v2"' in out.stdout  # order-2's result comes from v2's code
    rows = dict(
        (m.group(1), m.groups()[1:])
        for m in re.finditer(r"^orders\t(\S+)\t(\*?)\t(\d+)\t\S*\t(\d+)$", out.stdout, re.M)
    )
    assert rows["v1"] == ("", "0", "0") and rows["v2"] == ("*", "0", "0"), out.stdout
    assert "upgrade done: v1 stopped" in out.stdout
