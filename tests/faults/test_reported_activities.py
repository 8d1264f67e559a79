"""A worker killed after its activities reported runs none of them again (issue 15, item 8).

One workflow schedules a slow activity and then ten quick ones on the same partition of the
activity-task topic; the quick ones finish above the slow one's offset, which stays in flight.
The worker is SIGKILLed once history holds the ten results; a new worker gets the partition
from the last committed offset (the slow task's). Before, every quick task was delivered again
and ran a second time; with results and offsets in one transaction (the commit metadata naming
the tasks that reported), only the slow one runs again: it had not reported.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
from pathlib import Path

from kadence import Worker
from tests.faults.reporting.activities import FanOut
from tests.integration.conftest import wait_until
from tests.integration.invariants import check_history, histories

ROOT = Path(__file__).resolve().parents[2]
N = 10


def _worker(config, logdir: Path, executions: Path, n: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap,
        "KADENCE_NAMESPACE": config.namespace,
        "KADENCE_TEST_EXECUTIONS": str(executions),
        "KADENCE_TEST_SLOW_S": "30" if n == 1 else "0.1",
    }
    log = open(logdir / f"activity-worker-{n}.log", "w")
    return subprocess.Popen(
        [sys.executable, "-m", "tests.faults.reporting.activities"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _completed(config, workflow_id: str) -> int:
    runs = [v for k, v in histories(config).items() if k[0] == workflow_id]
    return sum(1 for events in runs for e in events if e["attributes"][0] == "ActivityTaskCompleted")


async def test_a_killed_worker_runs_no_reported_activity_again(client, processors, kafka_config, tmp_path):
    processors.start()
    executions = tmp_path / "executions.log"
    executions.touch()
    first = _worker(kafka_config, tmp_path, executions, 1)
    try:
        async with Worker(client, task_queue="wf", workflows=[FanOut]):
            handle = await client.start_workflow(FanOut, N, id="fan-1", task_queue="wf")
            await wait_until(lambda: _completed(kafka_config, "fan-1") >= N, 60, "the quick activities' results")
            first.send_signal(signal.SIGKILL)
            first.wait(10)
            second = _worker(kafka_config, tmp_path, executions, 2)
            try:
                assert await handle.result(timeout=90) == ["slow", *range(N)]
            finally:
                second.terminate()
                second.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
    runs = collections.Counter(line.split("|")[0] for line in executions.read_text().splitlines())
    assert {k: v for k, v in runs.items() if k != "slow"} == {f"quick-{i}": 1 for i in range(N)}, (
        f"activities that had reported ran again after the kill: {runs}"
    )
    assert runs["slow"] == 2, f"the slow activity had not reported: it must run again ({runs})"
    [(_, events)] = [(k, v) for k, v in histories(kafka_config).items() if k[0] == "fan-1"]
    assert check_history(events) == []
