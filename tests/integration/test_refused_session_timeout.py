"""A session timeout the broker refuses (below its ``group.min.session.timeout.ms``, 6 s by
default) stops the processor, the timer service and the worker with a ``ConfigError`` naming the
setting. Before, each warned ``JoinGroup failed: Broker: Invalid session timeout`` every two
seconds for ever and served nothing."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from kadence import Worker, WorkerCrashedError, activity


@activity.defn
async def noop() -> None:
    return None


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize(
    "argv", [["processor", "--instance-id", "p0"], ["timers", "--instance-id", "t0"]], ids=["processor", "timers"]
)
def test_a_refused_session_timeout_stops_the_service_with_the_setting_named(kafka_config, argv):
    env = {
        **os.environ,
        "KADENCE_KAFKA_BOOTSTRAP": kafka_config.bootstrap,
        "KADENCE_NAMESPACE": kafka_config.namespace,
        "KADENCE_SESSION_TIMEOUT_MS": "3000",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "kadence.cli", *argv], env=env, cwd=ROOT, capture_output=True, text=True, timeout=90
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "refuses the group session timeout 3000 ms (KADENCE_SESSION_TIMEOUT_MS)" in proc.stderr, proc.stderr[-3000:]


async def test_a_refused_session_timeout_stops_the_worker_with_the_setting_named(client):
    worker = Worker(client, task_queue="refused", activities=[noop], session_timeout_ms=3000)
    with pytest.raises(WorkerCrashedError, match=r"refuses the group session timeout 3000 ms"):
        await asyncio.wait_for(worker.run(), 60)
