"""The history processor's Prometheus families (docs/metrics.md)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kadence.schemas.records import ConcurrencyState
from kadence.topics.concurrency import RATE_KEY_PREFIX
from kadence.topics.consumer_lag import LagSampler, lag_gauge
from kadence.topics.metric_labels import OTHER, BoundedLabel

from .effects import Outbox

__all__ = ["ProcessorMetrics"]


class ProcessorMetrics:
    """The processor's families; every one carries ``namespace`` (bound here where it is the only
    label, so that a call site reads ``metrics.commands.inc()``)."""

    def __init__(self, registry: CollectorRegistry, namespace: str) -> None:
        self.namespace = namespace
        r, ns = registry, ["namespace"]
        self.commands = Counter("kadence_processor_commands", "commands processed", ns, registry=r).labels(namespace)
        self.batches = Histogram(
            "kadence_processor_batch_size",
            "commands per transaction",
            ns,
            registry=r,
            buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000),
        ).labels(namespace)
        self.commit = Histogram(
            "kadence_processor_commit_seconds",
            "transaction commit time",
            ns,
            registry=r,
            buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 5),
        ).labels(namespace)
        self.duplicates = Counter(
            "kadence_processor_duplicates_suppressed", "duplicate requests answered from memory", ns, registry=r
        ).labels(namespace)
        self.stale = Counter(
            "kadence_processor_stale_rejected", "stale task completions rejected", ns, registry=r
        ).labels(namespace)
        eager = Counter(
            "kadence_processor_eager_workflow_tasks",
            "eager workflow tasks, by outcome",
            ["namespace", "outcome"],
            registry=r,
        )
        self.eager_accepted, self.eager_refused = (
            eager.labels(namespace, "accepted"),
            eager.labels(namespace, "refused"),
        )
        self.dlq = Counter(
            "kadence_processor_dead_letters", "commands sent to the dead-letter topic", ns, registry=r
        ).labels(namespace)
        self.closes_refused = Counter(
            "kadence_processor_closing_tasks_refused",
            "workflow tasks that would close a run refused: signals or updates came after them, a new task carries them",
            ns,
            registry=r,
        ).labels(namespace)
        self.eager_activities = Counter(
            "kadence_processor_eager_activities",
            "activity attempts sent in the reply to the worker that asked to run them, not to the task topic (decision 0054)",
            ns,
            registry=r,
        ).labels(namespace)
        self.tasks_without_events = Counter(
            "kadence_processor_tasks_without_events",
            "workflow task records produced without their events (over task_max_bytes): the worker reads the history topic",
            ns,
            registry=r,
        ).labels(namespace)
        self.aborts = Counter("kadence_processor_aborts", "transactions aborted", ns, registry=r).labels(namespace)
        self.hung = Counter(
            "kadence_processor_txn_hangs",
            "send_offsets_to_transaction calls given up on (producer replaced)",
            ns,
            registry=r,
        ).labels(namespace)
        self.deadlines = Counter(
            "kadence_processor_deadlines_fired",
            "activity timeouts fired from the processor's deadline index",
            ns,
            registry=r,
        ).labels(namespace)
        self._runs(r)
        self.restore = Histogram(
            "kadence_processor_restore_seconds",
            "time to restore one shard on assignment",
            ns,
            registry=r,
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 300),
        ).labels(namespace)
        self.lag = LagSampler(lag_gauge(r), namespace, "processor")
        self._concurrency(r)

    def _runs(self, r: CollectorRegistry) -> None:
        """Workflow runs, by type (capped: a start request may name any type) and outcome."""
        self.runs_started = Counter(
            "kadence_processor_runs_started",
            "workflow runs started (committed)",
            ["namespace", "workflow_type"],
            registry=r,
        )
        self.runs_closed = Counter(
            "kadence_processor_runs_closed",
            "workflow runs closed (committed), by outcome",
            ["namespace", "workflow_type", "outcome"],
            registry=r,
        )
        self.run_seconds = Histogram(
            "kadence_processor_run_seconds",
            "workflow run start to close (workflow time), by outcome",
            ["namespace", "workflow_type", "outcome"],
            registry=r,
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400, 604800),
        )
        self.workflow_type = BoundedLabel()  # (shared with the standalone activities' types)
        # standalone activities (decision 0063): runs without code, counted apart from workflows
        self.activities_started = Counter(
            "kadence_processor_standalone_activities_started",
            "standalone activities started (committed)",
            ["namespace", "activity_type"],
            registry=r,
        )
        self.activities_closed = Counter(
            "kadence_processor_standalone_activities_closed",
            "standalone activities closed (committed), by outcome",
            ["namespace", "activity_type", "outcome"],
            registry=r,
        )
        self.activity_seconds = Histogram(
            "kadence_processor_standalone_activity_seconds",
            "standalone activity start to close (through its retries), by outcome",
            ["namespace", "activity_type", "outcome"],
            registry=r,
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400),
        )

    def _concurrency(self, r: CollectorRegistry) -> None:
        """Concurrency limits (decision 0057): counters by limit name; the holders and waiters of
        each key this processor owns (the first 200 keys it meets: ``kadence limits`` shows all)."""
        self.inline = Counter(
            "kadence_processor_commands_inline",
            "commands for a shard of this instance applied in the batch that sent them, not produced (concurrency slots)",
            ["namespace"],
            registry=r,
        ).labels(self.namespace)
        by_name = ["namespace", "limit"]
        self.slots_granted = Counter(
            "kadence_concurrency_slots_granted", "concurrency slots granted by their key's owner", by_name, registry=r
        )
        self.slots_refused = Counter(
            "kadence_concurrency_requests_refused",
            "concurrency slot requests refused: the key's queue was full",
            by_name,
            registry=r,
        )
        self.slot_wait = Histogram(
            "kadence_concurrency_slot_wait_seconds",
            "from a run's or an activity's request for a concurrency slot to its grant",
            by_name,
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
        )
        self.throttled = Histogram(
            "kadence_rate_limit_delay_seconds",
            "from a run's or an activity's request to a rate limit to the time it was admitted for",
            by_name,
            registry=r,
            buckets=(0, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400),
        )
        by_key = ["namespace", "key"]
        self.slots_in_use = Gauge("kadence_concurrency_in_use", "slots held, per key owned", by_key, registry=r)
        self.slots_waiting = Gauge("kadence_concurrency_waiting", "requests waiting, per key owned", by_key, registry=r)
        self.limit_key, self.limit_name = BoundedLabel(), BoundedLabel(50)

    def limits(self, changed: dict[str, ConcurrencyState]) -> None:
        """The holders and waiters of the keys a committed batch changed."""
        for key, cs in changed.items():
            if cs.get("per_ms") is not None:
                continue  # a rate limit holds nothing: its delays are kadence_rate_limit_delay_seconds
            label = self.limit_key.value(key.partition(":")[2])
            if label != OTHER:
                self.slots_in_use.labels(self.namespace, label).set(len(cs["holders"]))
                self.slots_waiting.labels(self.namespace, label).set(len(cs["waiters"]))

    def forget_limits(self, keys: list[str]) -> None:
        """A shard moved away: its keys' gauges are its new owner's to report."""
        for key in keys:
            if key.startswith(RATE_KEY_PREFIX):
                continue  # no gauges (``limits``)
            label = key.partition(":")[2]
            for gauge in (self.slots_in_use, self.slots_waiting):
                try:
                    gauge.remove(self.namespace, label)
                except KeyError:
                    pass

    def committed(self, out: Outbox) -> None:
        """Count what a batch's outbox did, once the batch has committed."""
        self.duplicates.inc(out.duplicates)
        self.stale.inc(out.stale)
        for n, counter in (
            (out.eager_accepted, self.eager_accepted),
            (out.eager_refused, self.eager_refused),
            (out.closes_refused, self.closes_refused),
            (out.eager_activities, self.eager_activities),
            (out.inline, self.inline),
        ):
            if n:
                counter.inc(n)
        for name in out.slots_granted:
            self.slots_granted.labels(self.namespace, self.limit_name.value(name)).inc()
        for name in out.slots_refused:
            self.slots_refused.labels(self.namespace, self.limit_name.value(name)).inc()
        for name, ms in out.slot_waits:
            self.slot_wait.labels(self.namespace, self.limit_name.value(name)).observe(ms / 1000)
        for name, ms in out.throttled:
            self.throttled.labels(self.namespace, self.limit_name.value(name)).observe(ms / 1000)
        for wtype, standalone in out.runs_started:
            started = self.activities_started if standalone else self.runs_started
            started.labels(self.namespace, self.workflow_type.value(wtype)).inc()
        for wtype, outcome, ms, standalone in out.runs_closed:
            label = self.workflow_type.value(wtype)
            closed, seconds = (
                (self.activities_closed, self.activity_seconds) if standalone else (self.runs_closed, self.run_seconds)
            )
            closed.labels(self.namespace, label, outcome).inc()
            seconds.labels(self.namespace, label, outcome).observe(max(0, ms) / 1000)
