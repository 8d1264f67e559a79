"""Activities as Temporal users expect them (issue 44): bound-method activities, a warning for
each failed attempt, and a worker that cancels what it runs when it shuts down and lets its
process exit within the graceful timeout."""

from __future__ import annotations

import concurrent.futures as cf
import logging
import os
import subprocess
import sys
import time
from datetime import timedelta

import pytest

from kadence import DefinitionError, RetryPolicy, Worker, activity, workflow
from kadence.testing import WorkflowEnvironment

T = timedelta(seconds=30)


class Ledger:
    """Activities as methods of an object that holds a dependency (a connection, a client)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.calls = 0

    @activity.defn
    async def record(self, amount: int) -> str:
        self.calls += 1
        return f"{self.prefix}:{amount}"

    @activity.defn
    def audit(self, amount: int) -> int:
        self.calls += 1
        if activity.info().attempt == 1:
            raise ConnectionError("the audit store blinked")
        return amount * 2


@workflow.defn
class Book:
    @workflow.run
    async def run(self, amount: int) -> list:
        fast = RetryPolicy(initial_interval=timedelta(milliseconds=50))
        first = await workflow.execute_activity_method(Ledger.record, amount, start_to_close_timeout=T)
        second = await workflow.execute_activity_method(
            Ledger.audit, amount, start_to_close_timeout=T, retry_policy=fast
        )
        return [first, second]


async def test_bound_method_activities_run_and_every_failed_attempt_is_logged(client, processors, caplog):
    processors.start()
    processors.start_timers()
    ledger = Ledger("acct-7")
    caplog.set_level(logging.WARNING, logger="kadence._activity_runner")
    async with Worker(client, task_queue="ledger", workflows=[Book], activities=[ledger.record, ledger.audit]):
        result = await client.execute_workflow(Book, 5, id="book-1", task_queue="ledger")
    assert result == ["acct-7:5", 10]
    assert ledger.calls == 3  # record once, audit twice (its first attempt failed)
    warnings = [r.getMessage() for r in caplog.records if r.name == "kadence._activity_runner"]
    assert warnings == ["activity audit (2) attempt 1 failed: ConnectionError"], warnings


def test_a_method_registered_from_its_class_is_refused_with_the_fix_named():
    with pytest.raises(
        DefinitionError, match=r"register it bound to an instance \(activities=\[Ledger\(\.\.\.\)\.audit\]"
    ):
        WorkflowEnvironment(activities=[Ledger.audit])  # registers as a Worker does


async def test_a_stopping_worker_cancels_its_activities_and_its_process_exits_within_the_graceful_timeout(
    kafka_config, processors
):
    processors.start()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.shutdown_app",
            kafka_config.bootstrap,
            kafka_config.namespace,
            "shutdown-1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    stopping_at = None
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip())
            if "shutting down" in line:
                stopping_at = time.monotonic()
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    exited_after = time.monotonic() - stopping_at if stopping_at else None
    out = "\n".join(lines)
    assert proc.returncode == 0, out[-3000:]
    assert "polite_sync saw the cancellation (worker shutdown: True)" in out, out[-3000:]
    assert "polite_async was cancelled (worker shutdown: True)" in out, out[-3000:]
    assert "1 activities still running after the 2.0 s graceful shutdown timeout" in out, out[-3000:]
    assert "stubborn_sync" in out
    # the stubborn thread does not hold the process: it ends soon after the 2 s grace
    assert exited_after is not None and exited_after < 2 + 8, (exited_after, out[-3000:])


@activity.defn
def crunch(rounds: int) -> dict:
    """CPU-bound: runs in a child process, heartbeating through the worker."""
    for i in range(rounds):
        activity.heartbeat(i)
        time.sleep(0.25)
    return {"pid": os.getpid(), "attempt": activity.info().attempt}


@workflow.defn
class Crunch:
    @workflow.run
    async def run(self, rounds: int) -> dict:
        return await workflow.execute_activity(
            crunch,
            rounds,
            start_to_close_timeout=T,
            heartbeat_timeout=timedelta(seconds=1),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )


async def test_a_process_pool_runs_sync_activities_in_child_processes_whose_heartbeats_reach_the_engine(
    client, processors
):
    processors.start()
    processors.start_timers()
    with cf.ProcessPoolExecutor(max_workers=1) as pool:
        async with Worker(client, task_queue="crunch", workflows=[Crunch], activities=[crunch], activity_executor=pool):
            # 3 s of work under a 1 s heartbeat timeout: only heartbeats from the child keep it alive
            result = await client.execute_workflow(Crunch, 12, id="crunch-1", task_queue="crunch")
    assert result["pid"] != os.getpid() and result["attempt"] == 1
