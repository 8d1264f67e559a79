"""The processor's view of worker builds: which build new workflows of each queue start on, and
the backlog of every build as Prometheus gauges.

``BuildDefaults`` follows ``{ns}.builds`` (compacted, key = task queue) as a
``kadence.topics.compacted.CompactedTable``: read to its end before the first batch, then polled
without blocking after each poll of the commands topic. Every processor instance reads
all of it (it holds one record per task queue).

``QueueRules`` follows ``{ns}.queue_limits`` the same way, for the queues' concurrency rules
(``kadence queues set-limit --concurrency``): the limits each activity scheduled on a queue
holds besides its own (``processors.concurrency``).

``BacklogReporter`` measures, off the hot path (its own thread, every ``interval_s``), the
workflow tasks waiting on every build's topic (``kadence.topics.backlog.BacklogProbe``) and
exports ``kadence_build_backlog{queue,build}`` and ``kadence_build_oldest_task_age_seconds``
(``build=""``: the queue's unversioned tasks), and the activity tasks waiting on every queue's
topic as ``kadence_queue_activity_backlog{queue}`` and
``kadence_queue_activity_oldest_task_age_seconds``. A build whose workers are gone shows a backlog
that stays above zero: its workflows wait, nothing is lost.
"""

from __future__ import annotations

import logging
import threading

from prometheus_client import CollectorRegistry, Gauge

from kadence.topics import serde
from kadence.topics.backlog import BacklogProbe
from kadence.topics.builds import validate_build_id
from kadence.topics.catalogue import Catalogue
from kadence.topics.compacted import CompactedTable
from kadence.topics.config import KafkaConfig
from kadence.topics.errors import KadenceError
from kadence.topics.queue_limits import QueueLimit, decode_queue_limit

__all__ = ["BacklogReporter", "BuildDefaults", "QueueRules"]

log = logging.getLogger(__name__)


class BuildDefaults:
    """Task queue -> the build new workflows start on (absent or None: unversioned)."""

    def __init__(self, kafka: KafkaConfig, registry: CollectorRegistry | None = None) -> None:
        self._table: CompactedTable[str | None] = CompactedTable(
            kafka, Catalogue(kafka).builds, _decode_build, self._changed
        )
        self.topic = self._table.topic
        #: read by the state machine (one lookup when a run starts); only this thread writes it
        self.defaults: dict[str, str | None] = {}
        self._namespace = kafka.namespace
        self._gauge = (
            Gauge(
                "kadence_build_default",
                "1 for the build new workflows of a task queue start on",
                ["namespace", "task_queue", "build"],
                registry=registry,
            )
            if registry is not None
            else None
        )

    def start(self, timeout: float = 30.0) -> None:
        """Read the topic to its end."""
        self._table.start(timeout)
        log.info("build defaults: %s", {q: b or "(unversioned)" for q, b in self.defaults.items()} or "none")

    def poll(self) -> None:
        """Apply what has arrived; never blocks."""
        self._table.poll()

    def _changed(self, queue: str, _old: str | None, build: str | None) -> None:
        previous = self.defaults.get(queue)
        self.defaults[queue] = build
        if self._gauge is not None:
            if previous is not None:
                self._gauge.remove(self._namespace, queue, previous)
            if build is not None:
                self._gauge.labels(self._namespace, queue, build).set(1)
        if previous != build:
            log.info("task queue %s: new workflows start on build %s", queue, build or "(unversioned)")

    def close(self) -> None:
        self._table.close()


class QueueRules:
    """Task queue -> its ``QueueLimit`` (rate limits and concurrency rules), as last written.
    A missing topic is created (a namespace made before the queue limits)."""

    def __init__(self, kafka: KafkaConfig) -> None:
        cat = Catalogue(kafka)
        self._catalogue = cat
        self._table: CompactedTable[QueueLimit | None] = CompactedTable(
            kafka, cat.queue_limits, decode_queue_limit, self._changed
        )
        #: read by the state machine when it schedules an activity; only this thread writes it
        self.limits: dict[str, QueueLimit] = {}

    def start(self, timeout: float = 30.0) -> None:
        self._catalogue.apply([s for s in self._catalogue.core_specs() if s.name == self._catalogue.queue_limits])
        self._table.start(timeout)

    def poll(self) -> None:
        self._table.poll()

    def _changed(self, queue: str, _old: QueueLimit | None, limit: QueueLimit | None) -> None:
        if limit is None or not limit.activity_concurrency:
            self.limits.pop(queue, None)
        else:
            self.limits[queue] = limit
            log.info("task queue %s: concurrency rules %s", queue, dict(limit.activity_concurrency))

    def close(self) -> None:
        self._table.close()


def _decode_build(_queue: str, value: bytes) -> str | None:
    return validate_build_id(serde.decode("BuildDefault", value)["build_id"], allow_none=True)


class BacklogReporter:
    """A thread that refreshes the backlog gauges (workflow tasks per build, activity tasks per
    queue) every ``interval_s`` seconds."""

    def __init__(self, kafka: KafkaConfig, registry: CollectorRegistry, interval_s: float) -> None:
        self.kafka = kafka
        self.interval_s = interval_s
        self._backlog = Gauge(
            "kadence_build_backlog",
            "workflow tasks waiting for a worker of this build",
            ["namespace", "task_queue", "build"],
            registry=registry,
        )
        self._age = Gauge(
            "kadence_build_oldest_task_age_seconds",
            "age of the oldest workflow task waiting for a worker of this build",
            ["namespace", "task_queue", "build"],
            registry=registry,
        )
        self._activity_backlog = Gauge(
            "kadence_queue_activity_backlog",
            "activity tasks waiting on the queue's topic for a worker (eager activities never wait there)",
            ["namespace", "task_queue"],
            registry=registry,
        )
        self._activity_age = Gauge(
            "kadence_queue_activity_oldest_task_age_seconds",
            "age of the oldest activity task waiting for a worker of the queue: the queue's capacity signal",
            ["namespace", "task_queue"],
            registry=registry,
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kadence-build-backlog", daemon=True)
        self.measurements = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)

    def _run(self) -> None:
        probe = BacklogProbe(self.kafka)
        try:
            while not self._stop.is_set():
                try:
                    self.refresh(probe)
                except KadenceError as exc:
                    log.warning("build backlog not measured: %s", exc)
                self._stop.wait(self.interval_s)
        finally:
            probe.close()

    def refresh(self, probe: BacklogProbe) -> None:
        for b in probe.measure():
            labels = (self.kafka.namespace, b.task_queue, b.build_id or "")
            self._backlog.labels(*labels).set(b.backlog)
            self._age.labels(*labels).set(b.oldest_age_s or 0.0)
        for a in probe.measure_activities():
            self._activity_backlog.labels(self.kafka.namespace, a.task_queue).set(a.backlog)
            self._activity_age.labels(self.kafka.namespace, a.task_queue).set(a.oldest_age_s or 0.0)
        self.measurements += 1
