"""A worker's Prometheus metrics (issue 21): what it ran, how long, how late, and how it ended.

Labelled by namespace, task queue and workflow or activity type: bounded sets, never a workflow
ID. The registry is the caller's (``Worker(metrics_registry=...)``; ``kadence worker`` always
passes one, and serves it on ``--metrics-port``); there is no global registry, so two workers in
one process never collide. Without a registry the worker records nothing (``NO_METRICS``): the
families cost about 8-20 us per activity and workflow task (``timeit``, on a loaded machine), a
price a worker whose metrics nobody can read should not pay.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kadence.topics.consumer_lag import LagSampler, lag_gauge

__all__ = ["NO_METRICS", "WorkerMetrics"]

#: seconds: from a millisecond-scale activity to a long one
_DURATION = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
#: seconds a task waited in its topic before a worker began it (the design's capacity signal)
_WAIT = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 86400)


class WorkerMetrics:
    """The worker's metric families; ``for_queue`` binds the constant labels once."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else CollectorRegistry()
        self.registry = r
        self.workflow_tasks = Counter(
            "kadence_worker_workflow_tasks",
            "workflow tasks handled, by outcome (completed, failed, non_determinism, history_requested, stale)",
            ["namespace", "task_queue", "workflow_type", "outcome"],
            registry=r,
        )
        self.workflow_task_seconds = Histogram(
            "kadence_worker_workflow_task_seconds",
            "time to run a workflow task's code (replay included)",
            ["namespace", "task_queue", "workflow_type"],
            buckets=_DURATION,
            registry=r,
        )
        self.activities = Counter(
            "kadence_worker_activity_executions",
            "activity executions, by outcome (completed, failed, cancelled, interrupted: the worker stopped meanwhile)",
            ["namespace", "task_queue", "activity_type", "outcome"],
            registry=r,
        )
        self.activity_retries = Counter(
            "kadence_worker_activity_retries",
            "activity executions of an attempt after the first",
            ["namespace", "task_queue", "activity_type"],
            registry=r,
        )
        self.activity_seconds = Histogram(
            "kadence_worker_activity_seconds",
            "time an activity's function ran",
            ["namespace", "task_queue", "activity_type"],
            buckets=_DURATION,
            registry=r,
        )
        self.schedule_to_start = Histogram(
            "kadence_worker_activity_schedule_to_start_seconds",
            "from an attempt's scheduling to a worker beginning it",
            ["namespace", "task_queue", "activity_type"],
            buckets=_WAIT,
            registry=r,
        )
        self.rate_limited = Histogram(
            "kadence_worker_activity_rate_limited_seconds",
            "how long an activity task that the queue's rate limit held back waited for it at this worker",
            ["namespace", "task_queue"],
            buckets=_WAIT,
            registry=r,
        )
        self.running = Gauge(
            "kadence_worker_activities_running", "activities running now", ["namespace", "task_queue"], registry=r
        )
        self.queries = Counter("kadence_worker_queries", "queries answered", ["namespace", "task_queue"], registry=r)
        self.heartbeats = Counter(
            "kadence_worker_heartbeats", "activity heartbeats sent", ["namespace", "task_queue"], registry=r
        )
        self.consumer_lag = lag_gauge(r)

    def for_queue(self, namespace: str, task_queue: str) -> QueueMetrics:
        return QueueMetrics(self, namespace, task_queue)


class QueueMetrics:
    """The families with namespace and task queue bound (what one ``Worker`` records)."""

    def __init__(self, m: WorkerMetrics, namespace: str, task_queue: str) -> None:
        self._m, self._ns, self._q = m, namespace, task_queue
        self.running = m.running.labels(namespace, task_queue)
        self.queries = m.queries.labels(namespace, task_queue)
        self.heartbeats = m.heartbeats.labels(namespace, task_queue)

    def rate_limited(self, seconds: float) -> None:
        """An activity task started after waiting ``seconds`` for the queue's rate limit (any thread)."""
        self._m.rate_limited.labels(self._ns, self._q).observe(seconds)

    def lag_sampler(self) -> LagSampler:
        """For one task consumer: its topic's lag in ``kadence_consumer_lag_records{component="worker"}``."""
        return LagSampler(self._m.consumer_lag, self._ns, "worker")

    def workflow_task(self, workflow_type: str, outcome: str, seconds: float | None = None) -> None:
        self._m.workflow_tasks.labels(self._ns, self._q, workflow_type, outcome).inc()
        if seconds is not None:
            self._m.workflow_task_seconds.labels(self._ns, self._q, workflow_type).observe(seconds)

    def activity_started(self, activity_type: str, attempt: int, waited_s: float | None) -> None:
        """``waited_s``: schedule -> start; None for a local activity (it waits for no task)."""
        self.running.inc()
        if waited_s is not None:
            self._m.schedule_to_start.labels(self._ns, self._q, activity_type).observe(max(0.0, waited_s))
        if attempt > 1:
            self._m.activity_retries.labels(self._ns, self._q, activity_type).inc()

    def activity_ended(self, activity_type: str, outcome: str, seconds: float) -> None:
        self.running.dec()
        self._m.activities.labels(self._ns, self._q, activity_type, outcome).inc()
        self._m.activity_seconds.labels(self._ns, self._q, activity_type).observe(seconds)


class _Nothing:
    def inc(self, *_a: Any) -> None:
        pass

    def dec(self, *_a: Any) -> None:
        pass


class _NoMetrics:
    """What a worker without a registry records: nothing, at no cost."""

    running = queries = heartbeats = _Nothing()

    def lag_sampler(self) -> LagSampler:
        return LagSampler(None, "", "worker")

    def rate_limited(self, seconds: float) -> None:
        pass

    def workflow_task(self, workflow_type: str, outcome: str, seconds: float | None = None) -> None:
        pass

    def activity_started(self, activity_type: str, attempt: int, waited_s: float | None) -> None:
        pass

    def activity_ended(self, activity_type: str, outcome: str, seconds: float) -> None:
        pass


NO_METRICS = _NoMetrics()
