"""Batch operations on the real broker (#17): 1,000 running workflows terminated by one
``kadence batch terminate``, its worker SIGKILLed halfway and started again; every run is
terminated exactly once, and the progress counts all of them."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import subprocess
import sys

import pytest

from kadence import workflow
from kadence.operations import BatchProgress
from kadence.topics import Catalogue, NoReplyError
from tests.support.cli import kadence

from .conftest import wait_until
from .invariants import read_topic
from .projection_support import ProjectionProcs, redis_url

RUNS = 1000


@workflow.defn
class Parked:
    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)


@pytest.fixture
def projection(kafka_config, tmp_path):
    procs = ProjectionProcs(kafka_config, tmp_path)
    procs.start()
    yield procs
    procs.close()


def _batch_worker(kafka_config, log_path) -> subprocess.Popen:
    env = {
        **os.environ,
        "KADENCE_KAFKA_BOOTSTRAP": kafka_config.bootstrap,
        "KADENCE_NAMESPACE": kafka_config.namespace,
        "KADENCE_REDIS_URL": redis_url(),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "kadence.cli", "batch", "worker"],
        env=env,
        stdout=open(log_path, "a"),
        stderr=subprocess.STDOUT,
    )


# its own waits add up to more than the suite's 300 s (120 s to list, 120 to halfway, 300 to the
# end): on a loaded machine the whole test legitimately outlasts the default, as it did once in CI
@pytest.mark.timeout(600)
async def test_a_batch_terminates_a_thousand_runs_once_each_across_a_worker_kill(
    client, processors, kafka_config, projection, tmp_path
):
    processors.start()
    # a page's attempt runs eagerly on the batch's worker: after the kill it is retried when its
    # heartbeat timeout passes, after a backoff the timer service fires
    processors.start_timers()
    # no worker for their queue: each run stays open, its first workflow task waiting
    await asyncio.gather(*(client.start_workflow(Parked, id=f"parked-{i}", task_queue="parked") for i in range(RUNS)))

    async def all_listed():
        rc, out, _err = await kadence(
            kafka_config, "list", "--type", "Parked", "--status", "running", "--count", "-o", "json"
        )
        return rc == 0 and json.loads(out)["total"] == RUNS

    await wait_until(all_listed, 120, "the visibility projection to list the 1,000 runs")

    log = tmp_path / "batch-worker.log"
    worker = _batch_worker(kafka_config, log)
    try:
        rc, out, err = await kadence(
            kafka_config,
            "batch",
            "terminate",
            "--type",
            "Parked",
            "--status",
            "running",
            "--reason",
            "retired",
            "--id",
            "batch-1",
            "--page-size",
            "50",
        )
        assert rc == 0, err
        handle = client.get_workflow_handle("batch-1")

        async def progress() -> BatchProgress | None:
            try:
                return await handle.query("progress", result_type=BatchProgress)
            except NoReplyError:
                # a query is answered by the batch's worker: one sent while the killed worker's
                # partitions move to its replacement (session timeout, start-up, replay; beside
                # CPU burners that took over 30 s once) gets no answer in time; the test asks again
                return None

        async def halfway():
            p = await progress()
            return p is not None and p.done >= 300 and p

        first = await wait_until(halfway, 120, "the batch to get through 300 runs")
        assert not first.finished and first.total == RUNS
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        worker = _batch_worker(kafka_config, log)

        async def finished():
            p = await progress()
            return p is not None and p.finished and p

        final = await wait_until(finished, 300, "the batch to finish after its worker was restarted")
        assert (final.total, final.done, final.succeeded, final.failed, final.failures) == (RUNS, RUNS, RUNS, 0, [])
        rc, out, err = await kadence(kafka_config, "batch", "status", "batch-1")
        assert rc == 0 and json.loads(out)["done"] == RUNS, err
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)

    # every run terminated exactly once, by the batch's request; nothing else happened to them
    terminated = collections.Counter()
    closes = collections.Counter()
    for _key, event, _p, _o in read_topic(kafka_config, Catalogue(kafka_config).history, "HistoryEvent"):
        wf = event["aggregate_key"]
        if not wf.startswith("parked-"):
            continue
        kind, attrs = event["attributes"]
        if kind == "WorkflowExecutionTerminated":
            terminated[wf] += 1
            assert attrs["reason"] == "retired"
        if kind.startswith("WorkflowExecution") and kind not in ("WorkflowExecutionStarted",):
            closes[wf] += 1
    assert len(terminated) == RUNS and set(terminated.values()) == {1}, terminated.most_common(3)
    assert closes == terminated
