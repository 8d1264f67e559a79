"""`kadence history --follow` prints a run's events as the engine records them and exits when
the run closes; `-o table` prints a header; `kadence builds list -o table` too (issue 17, item 7)."""

from __future__ import annotations

import asyncio
import os
import sys

from kadence import Worker
from tests.support.cli import kadence

from .workflows import Collector


async def test_history_follow_prints_events_until_the_run_closes(client, processors, kafka_config):
    processors.start()
    async with Worker(client, task_queue="follow", workflows=[Collector]):
        handle = await client.start_workflow(Collector, 1, id="follow-1", task_queue="follow")
        await handle.query("count")  # its first workflow task ran
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kadence.cli",
            "--log-level",
            "warning",
            "--bootstrap",
            kafka_config.bootstrap,
            "--namespace",
            kafka_config.namespace,
            "history",
            "follow-1",
            "--follow",
            "--poll",
            "0.2",
            "-o",
            "tsv",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ},
        )
        first = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert first.decode().startswith("1\t") and "\tWorkflowExecutionStarted\t" in first.decode()
        await handle.signal("add", "x")
        out, err = await asyncio.wait_for(proc.communicate(), 60)  # it exits by itself at the close
        assert proc.returncode == 0, err.decode()[-2000:]
        lines = [first.decode(), *out.decode().splitlines()]
        assert any("\tWorkflowSignaled\t" in line for line in lines)
        assert lines[-1].split("\t")[2] == "WorkflowExecutionCompleted"
        seqs = [int(line.split("\t")[0]) for line in lines]
        assert seqs == list(range(1, len(seqs) + 1))  # every event once, in order

    rc, out, err = await kadence(kafka_config, "history", "follow-1", "-o", "table")
    assert rc == 0, err
    assert out.splitlines()[0].split() == ["seq", "time", "type", "details"]
    rc, out, err = await kadence(kafka_config, "builds", "list", "-o", "table")
    assert rc == 0, err
    assert out.splitlines()[0].split()[:4] == ["task_queue", "build_id", "default", "backlog"]
