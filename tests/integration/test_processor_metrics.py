"""The processor's workflow-run metrics (issue 21), scraped over HTTP from ``kadence processor
--metrics-port``: runs started and closed by workflow type and outcome, start-to-close time, and
shard restore time. Counted once a batch has committed. And its consumer lag."""

from __future__ import annotations

import urllib.request
from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kadence import Worker, WorkflowFailureError
from tests.integration.workflows import ThreeSteps, VisQuick, VisWaiter, add, double, three_steps_result
from tests.support.net import free_port

from .conftest import PARTITIONS, wait_until

T = timedelta(seconds=30)


def _samples(port: int) -> dict:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


async def test_runs_started_closed_and_their_duration_by_type_and_outcome(processors, kafka_config, client):
    port = free_port()
    processors.start(env={"KADENCE_PROCESSOR_METRICS_PORT": str(port)})
    ns = kafka_config.namespace

    def value(name, **labels):
        return _samples(port).get((name, tuple(sorted({"namespace": ns, **labels}.items()))))

    async with Worker(client, task_queue="pm", workflows=[ThreeSteps, VisQuick, VisWaiter], activities=[add, double]):
        for i in range(2):
            handle = await client.start_workflow(ThreeSteps, i, id=f"pm-ok-{i}", task_queue="pm")
            assert await handle.result(timeout=60) == three_steps_result(i)
        failing = await client.start_workflow(VisQuick, True, id="pm-fail", task_queue="pm")
        with pytest.raises(WorkflowFailureError):
            await failing.result(timeout=60)
        waiting = await client.start_workflow(VisWaiter, id="pm-term", task_queue="pm")
        await waiting.terminate(reason="metrics test")
        # a standalone activity: counted apart from the workflow runs
        assert await client.execute_activity(add, 1, 2, id="pm-add", task_queue="pm", start_to_close_timeout=T) == 3

    await wait_until(
        lambda: value("kadence_processor_runs_closed_total", workflow_type="VisWaiter", outcome="terminated") == 1,
        30,
        "the terminated run to be counted",
    )
    assert value("kadence_processor_runs_started_total", workflow_type="ThreeSteps") == 2
    assert value("kadence_processor_runs_started_total", workflow_type="VisQuick") == 1
    assert value("kadence_processor_runs_closed_total", workflow_type="ThreeSteps", outcome="completed") == 2
    assert value("kadence_processor_runs_closed_total", workflow_type="VisQuick", outcome="failed") == 1
    assert value("kadence_processor_runs_closed_total", workflow_type="ThreeSteps", outcome="failed") is None
    assert value("kadence_processor_standalone_activities_started_total", activity_type="add") == 1
    assert value("kadence_processor_standalone_activities_closed_total", activity_type="add", outcome="completed") == 1
    assert value("kadence_processor_standalone_activity_seconds_count", activity_type="add", outcome="completed") == 1
    assert value("kadence_processor_runs_started_total", workflow_type="add") is None
    assert value("kadence_processor_run_seconds_count", workflow_type="ThreeSteps", outcome="completed") == 2
    assert value("kadence_processor_run_seconds_sum", workflow_type="ThreeSteps", outcome="completed") > 0
    # every shard was restored once, on its assignment
    assert _samples(port)[("kadence_processor_restore_seconds_count", (("namespace", ns),))] == PARTITIONS
    # caught up: at most a transaction marker per partition left (docs/metrics.md, Consumer lag)
    lag = _samples(port)[
        ("kadence_consumer_lag_records", (("component", "processor"), ("namespace", ns), ("topic", f"{ns}.commands")))
    ]
    assert 0 <= lag <= PARTITIONS
