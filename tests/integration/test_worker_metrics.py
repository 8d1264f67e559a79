"""A worker's metrics (issue 21): each family moves when its event happens, labelled by namespace,
task queue and type; ``kadence worker --metrics-port`` serves them with ``/readyz``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from kadence import Worker
from tests.integration.workflows import RetryOnce, ThreeSteps, add, double, fails_twice, three_steps_result
from tests.support.net import free_port

from .conftest import PARTITIONS, wait_until


async def test_worker_metrics_count_tasks_activities_retries_and_waits(processors, kafka_config, client):
    processors.start()
    processors.start_timers()  # the retries' backoff is a timer
    registry = CollectorRegistry()
    ns = kafka_config.namespace
    value = lambda name, **labels: registry.get_sample_value(name, {"namespace": ns, "task_queue": "m", **labels})  # noqa: E731
    async with Worker(
        client,
        task_queue="m",
        workflows=[ThreeSteps, RetryOnce],
        activities=[add, double, fails_twice],
        metrics_registry=registry,
    ):
        handle = await client.start_workflow(ThreeSteps, 4, id="metrics-1", task_queue="m")
        assert await handle.result(timeout=60) == three_steps_result(4)
        retried = await client.start_workflow(RetryOnce, id="metrics-2", task_queue="m")
        assert (await retried.result(timeout=60)).endswith("after 3 attempts")
    assert value("kadence_worker_activity_executions_total", activity_type="add", outcome="completed") == 2
    assert value("kadence_worker_activity_executions_total", activity_type="double", outcome="completed") == 1
    assert value("kadence_worker_activity_executions_total", activity_type="fails_twice", outcome="failed") == 2
    assert value("kadence_worker_activity_executions_total", activity_type="fails_twice", outcome="completed") == 1
    assert value("kadence_worker_activity_retries_total", activity_type="fails_twice") == 2
    assert value("kadence_worker_activity_retries_total", activity_type="add") is None
    assert value("kadence_worker_activity_seconds_count", activity_type="add") == 2
    assert value("kadence_worker_activity_schedule_to_start_seconds_count", activity_type="double") == 1
    assert value("kadence_worker_activities_running") == 0
    # ThreeSteps: one task to start and one per activity result (some may run eagerly, in the worker)
    assert value("kadence_worker_workflow_tasks_total", workflow_type="ThreeSteps", outcome="completed") >= 1
    assert value("kadence_worker_workflow_task_seconds_count", workflow_type="ThreeSteps") >= 1
    assert value("kadence_worker_workflow_tasks_total", workflow_type="ThreeSteps", outcome="non_determinism") is None


async def test_kadence_worker_serves_its_metrics_and_readiness(processors, kafka_config, client, tmp_path):
    processors.start()
    port = free_port()
    env = {**os.environ, "KADENCE_KAFKA_BOOTSTRAP": kafka_config.bootstrap, "KADENCE_NAMESPACE": kafka_config.namespace}
    log = tmp_path / "worker.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kadence.cli",
            "worker",
            "--task-queue",
            "served",
            "--module",
            "tests.faults.outage_app",
            "--metrics-port",
            str(port),
        ],
        env=env,
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
    )
    try:

        def ready():
            try:
                return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        await wait_until(ready, 60, "the worker reporting ready")
        handle = await client.start_workflow(ThreeSteps, 1, id="metrics-cli", task_queue="served")
        assert await handle.result(timeout=60) == three_steps_result(1)
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        key = (
            "kadence_worker_activity_executions_total",
            tuple(
                sorted(
                    {
                        "namespace": kafka_config.namespace,
                        "task_queue": "served",
                        "activity_type": "double",
                        "outcome": "completed",
                    }.items()
                )
            ),
        )
        assert samples.get(key) == 1.0, [k for k in samples if k[0] == key[0]]

        # both task consumers report their lag (sampled once a second); caught up: at most a
        # transaction marker per partition
        def lags() -> dict:
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
            return {
                s.labels["topic"]: s.value
                for family in text_string_to_metric_families(text)
                for s in family.samples
                if s.name == "kadence_consumer_lag_records" and s.labels["component"] == "worker"
            }

        topics = {f"{kafka_config.namespace}.tasks.{kind}.served" for kind in ("workflow", "activity")}
        await wait_until(lambda: topics <= lags().keys(), 10, "both task consumers' lag")
        assert all(0 <= lag <= PARTITIONS for lag in lags().values()), lags()
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(30)
    assert rc == 0, log.read_text()[-3000:]
