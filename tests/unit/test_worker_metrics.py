"""The worker's metric families move when their events happen; a worker without a registry
records nothing."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client import CollectorRegistry

from kadence import KafkaConfig, Worker, activity
from kadence._worker_metrics import NO_METRICS, WorkerMetrics


@activity.defn
async def noop() -> None:
    return None


def test_each_family_moves_with_its_event():
    registry = CollectorRegistry()
    q = WorkerMetrics(registry).for_queue("ns", "orders")

    def value(name, **labels):
        return registry.get_sample_value(name, {"namespace": "ns", "task_queue": "orders", **labels})

    q.activity_started("charge", 1, 0.25)
    assert value("kadence_worker_activities_running") == 1
    q.activity_ended("charge", "completed", 0.5)
    q.activity_started("charge", 2, -3.0)  # a clock behind the scheduler's: counted as no wait
    q.activity_ended("charge", "failed", 0.1)
    q.workflow_task("Order", "completed", 0.002)
    q.workflow_task("Order", "stale")
    q.queries.inc()
    q.heartbeats.inc()
    assert value("kadence_worker_activities_running") == 0
    assert value("kadence_worker_activity_executions_total", activity_type="charge", outcome="completed") == 1
    assert value("kadence_worker_activity_executions_total", activity_type="charge", outcome="failed") == 1
    assert value("kadence_worker_activity_retries_total", activity_type="charge") == 1
    assert value("kadence_worker_activity_seconds_sum", activity_type="charge") == 0.6
    assert value("kadence_worker_activity_schedule_to_start_seconds_sum", activity_type="charge") == 0.25
    assert value("kadence_worker_workflow_tasks_total", workflow_type="Order", outcome="completed") == 1
    assert value("kadence_worker_workflow_tasks_total", workflow_type="Order", outcome="stale") == 1
    assert value("kadence_worker_workflow_task_seconds_count", workflow_type="Order") == 1
    assert value("kadence_worker_queries_total") == 1 and value("kadence_worker_heartbeats_total") == 1


def test_a_worker_without_a_registry_records_nothing_and_two_workers_do_not_collide():
    client = SimpleNamespace(
        engine=None, config=KafkaConfig(bootstrap="127.0.0.1:1", namespace="n"), interceptors=(), converter=None
    )
    assert Worker(client, task_queue="q", activities=[noop]).metrics is NO_METRICS
    registry = CollectorRegistry()
    a = Worker(client, task_queue="a", activities=[noop], metrics_registry=registry)
    b = Worker(client, task_queue="b", activities=[noop], metrics_registry=CollectorRegistry())
    a.metrics.queries.inc()
    b.metrics.queries.inc()
    assert registry.get_sample_value("kadence_worker_queries_total", {"namespace": "n", "task_queue": "a"}) == 1
