"""What waits on the task topics: the workflow tasks of every build of every queue (``BuildBacklog``,
``kadence.topics.builds``) and the activity tasks of every queue (``ActivityBacklog``), each as a
count and the age of the oldest waiting task. Backlog age is the capacity signal of a queue: tasks
that wait longer and longer mean too few workers (or a rate the queue's workers cannot take).

A backlog is the topic's end offsets minus the committed offsets of the group of the workers that
consume it, counted record by record (commit markers take offsets too). An activity attempt sent
to its worker in a reply (eager activities, decision 0054) never waits on the topic and is not
counted. Used by the processor's gauges (``processors.builds.BacklogReporter``), ``kadence builds
list``, ``kadence queues`` and the gateway."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from .builds import BuildBacklog, build_topics, read_build_defaults
from .catalogue import Catalogue
from .config import KafkaConfig
from .errors import BrokerUnavailableError
from .queue_limits import QueueLimit, limit_summary, read_queue_limits
from .records import now_ms

__all__ = [
    "QUEUE_COLUMNS",
    "ActivityBacklog",
    "BacklogProbe",
    "activity_backlogs",
    "activity_topics",
    "build_backlogs",
    "queue_backlogs",
]


@dataclass(frozen=True)
class ActivityBacklog:
    task_queue: str
    topic: str
    #: activity tasks waiting for a worker of the queue
    backlog: int
    #: seconds since the oldest waiting task was dispatched (None: nothing waits)
    oldest_age_s: float | None
    #: priority level -> tasks waiting on its lane (levels with none left out; decision 0060)
    by_level: dict[int, int] = field(default_factory=dict)


def activity_topics(cat: Catalogue, have: dict[str, int]) -> list[tuple[str, str]]:
    """(task queue, topic) of every activity-task topic."""
    prefix = cat.activity_tasks("")
    return [(name[len(prefix) :], name) for name in sorted(have) if name.startswith(prefix) and len(name) > len(prefix)]


class BacklogProbe:
    """Measures the backlogs of the task topics. Holds a consumer and an admin client; use from
    one thread, ``close()`` when done."""

    #: records counted one by one per partition; beyond, the backlog is estimated from offsets
    COUNT_LIMIT = 1000

    def __init__(self, config: KafkaConfig, *, timeout: float = 10.0) -> None:
        self.config = config
        self.cat = Catalogue(config)
        self.timeout = timeout
        self._admin = AdminClient(config.base())
        self._consumer = Consumer(config.consumer(None))
        #: group -> a consumer of that group that never subscribes (``_committed``)
        self._group_readers: dict[str, Consumer] = {}

    def close(self) -> None:
        for consumer in [self._consumer, *self._group_readers.values()]:
            try:
                consumer.close()
            except RuntimeError:
                pass
        self._group_readers.clear()

    def _committed(self, group: str, tps: list[TopicPartition]) -> dict[int, int]:
        """The group's committed offsets, read by a consumer of the group that never subscribes
        (so it never joins the group). Not ``AdminClient.list_consumer_group_offsets``: librdkafka
        2.16 dereferences the admin client's missing consumer group when the coordinator answers
        NOT_COORDINATOR (librdkafka #5040), which killed a processor with SIGSEGV on a fresh
        broker in about one start in eight (the backlog reporter's first probe)."""
        reader = self._group_readers.get(group)
        if reader is None:
            reader = self._group_readers[group] = Consumer(self.config.consumer(group))
        return {tp.partition: tp.offset for tp in reader.committed(tps, timeout=self.timeout)}

    def _waiting(self, ranges: dict[int, tuple[int, int]], topic: str) -> tuple[int, int | None]:
        """Count the task records in ``partition -> [start, end)`` and find the oldest one's timestamp.

        Offsets alone over-count: the processor writes tasks in transactions, and every commit
        marker takes an offset (a worker's committed offset stops before the marker after its
        last task). Up to ``COUNT_LIMIT`` records per partition are counted; beyond that the
        rest of the range is added as offsets (an upper bound)."""
        self._consumer.assign([TopicPartition(topic, p, lo) for p, (lo, _hi) in ranges.items()])
        counts = dict.fromkeys(ranges, 0)
        pending = set(ranges)
        oldest = None
        deadline = time.monotonic() + self.timeout
        try:
            while pending and time.monotonic() < deadline:
                for msg in self._consumer.consume(500, timeout=0.1):
                    p, offset = msg.partition(), msg.offset()
                    if msg.error() is not None or p not in pending or offset is None or offset >= ranges[p][1]:
                        continue
                    counts[p] += 1
                    ts = msg.timestamp()[1]
                    if ts > 0 and (oldest is None or ts < oldest):
                        oldest = ts
                for tp in self._consumer.position([TopicPartition(topic, p) for p in pending]):
                    if tp.offset >= ranges[tp.partition][1]:
                        pending.discard(tp.partition)
                    elif counts[tp.partition] >= self.COUNT_LIMIT:
                        counts[tp.partition] += ranges[tp.partition][1] - max(tp.offset, ranges[tp.partition][0])
                        pending.discard(tp.partition)
            for p in pending:  # not read in time: count the rest by offsets
                counts[p] += ranges[p][1] - ranges[p][0] - counts[p]
        finally:
            self._consumer.unassign()
        return sum(counts.values()), oldest

    def _backlog(self, group: str, topic: str, partitions: int) -> tuple[int, float | None]:
        """(tasks waiting on ``topic`` past ``group``'s committed offsets, the oldest's age in s)."""
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        committed = self._committed(group, tps)
        ranges = {}
        for tp in tps:
            low, high = self._consumer.get_watermark_offsets(tp, timeout=self.timeout)
            start = max(committed.get(tp.partition, -1), low)
            if high > start:
                ranges[tp.partition] = (start, high)
        if not ranges:
            return 0, None
        backlog, ts = self._waiting(ranges, topic)
        return backlog, (max(0.0, (now_ms() - ts) / 1000) if ts is not None else None)

    def _lanes_backlog(
        self, group: str, lanes: list[tuple[int, str]], have: dict[str, int], by_level: dict[int, int] | None = None
    ) -> tuple[int, float | None]:
        """(tasks waiting on every priority lane of one group's topics, the oldest's age in s);
        ``by_level`` gets each level's count. A lane that does not exist (a queue made before the
        lanes: its workers make them) has none."""
        total, oldest = 0, None
        for level, lane in lanes:
            if lane not in have:
                continue
            backlog, age = self._backlog(group, lane, have[lane])
            total += backlog
            if age is not None:
                oldest = age if oldest is None else max(oldest, age)
            if backlog and by_level is not None:
                by_level[level] = backlog
        return total, oldest

    def measure(self, task_queue: str | None = None) -> list[BuildBacklog]:
        """The workflow-task backlog of every build (and of the unversioned queue) of every queue,
        or of one queue."""
        try:
            have = self.cat.existing(self._admin, self.timeout)
            defaults = (
                {q: r["build_id"] for q, r in read_build_defaults(self.config).items()}
                if self.cat.builds in have
                else {}
            )
            out = []
            for queue, build, topic in build_topics(self.cat, have):
                if task_queue is not None and queue != task_queue:
                    continue
                group = (
                    self.cat.worker_group(queue, "workflow") if build is None else self.cat.build_group(queue, build)
                )
                backlog, age = self._lanes_backlog(group, self.cat.workflow_lanes(queue, build), have)
                out.append(BuildBacklog(queue, build, topic, defaults.get(queue) == build, backlog, age))
            return out
        except KafkaException as exc:
            raise BrokerUnavailableError(f"cannot measure build backlogs: {exc}") from exc

    def measure_activities(self, task_queue: str | None = None) -> list[ActivityBacklog]:
        """The activity-task backlog of every queue, or of one queue."""
        try:
            have = self.cat.existing(self._admin, self.timeout)
            out = []
            for queue, topic in activity_topics(self.cat, have):
                if task_queue is not None and queue != task_queue:
                    continue
                by_level: dict[int, int] = {}
                total, oldest = self._lanes_backlog(
                    self.cat.worker_group(queue, "activity"), self.cat.activity_lanes(queue), have, by_level
                )
                out.append(ActivityBacklog(queue, topic, total, oldest, by_level))
            return out
        except KafkaException as exc:
            raise BrokerUnavailableError(f"cannot measure activity backlogs: {exc}") from exc


def build_backlogs(config: KafkaConfig, task_queue: str | None = None) -> list[BuildBacklog]:
    """The backlog of every build (and of the unversioned queue) of every queue, or of one queue."""
    probe = BacklogProbe(config)
    try:
        return probe.measure(task_queue)
    finally:
        probe.close()


def activity_backlogs(config: KafkaConfig, task_queue: str | None = None) -> list[ActivityBacklog]:
    """The activity-task backlog of every queue, or of one queue."""
    probe = BacklogProbe(config)
    try:
        return probe.measure_activities(task_queue)
    finally:
        probe.close()


QUEUE_COLUMNS = (
    "task_queue",
    "workflow_backlog",
    "workflow_oldest_age_s",
    "activity_backlog",
    "activity_oldest_age_s",
    "activity_by_priority",
    "rate_limit",
)


def _age(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _older(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def queue_backlogs(
    config: KafkaConfig, task_queue: str | None = None, limits: dict[str, QueueLimit] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(one row per queue: workflow and activity tasks waiting and the oldest's age in s, and its
    rate limits in short; one row per build of those queues), measured once (``kadence queues``,
    ``GET /v1/queues``). ``limits``: the queues' limits when the caller has read them already."""
    probe = BacklogProbe(config)
    try:
        builds = probe.measure(task_queue)
        activities = probe.measure_activities(task_queue)
    finally:
        probe.close()
    rows: dict[str, dict[str, Any]] = {}

    def row(queue: str) -> dict[str, Any]:
        return rows.setdefault(
            queue,
            {
                c: (
                    queue
                    if c == "task_queue"
                    else 0
                    if c.endswith("backlog")
                    else ""
                    if c in ("rate_limit", "activity_by_priority")
                    else None
                )
                for c in QUEUE_COLUMNS
            },
        )

    build_rows = []
    for b in builds:
        r = row(b.task_queue)
        r["workflow_backlog"] += b.backlog
        r["workflow_oldest_age_s"] = _age(_older(r["workflow_oldest_age_s"], b.oldest_age_s))
        build_rows.append(
            {
                "task_queue": b.task_queue,
                "build_id": b.build_id,
                "default": b.is_default,
                "backlog": b.backlog,
                "oldest_task_age_s": _age(b.oldest_age_s),
            }
        )
    for a in activities:
        r = row(a.task_queue)
        r["activity_backlog"] = a.backlog
        r["activity_oldest_age_s"] = _age(a.oldest_age_s)
        # where the backlog waits, when not all on the default level: "p1=3 p5=10000"
        if set(a.by_level) - {3}:
            r["activity_by_priority"] = " ".join(f"p{level}={n}" for level, n in sorted(a.by_level.items()))
    for queue, limit in (read_queue_limits(config) if limits is None else limits).items():
        if limit.limited and (task_queue is None or queue == task_queue):
            row(queue)["rate_limit"] = limit_summary(limit)
    return [rows[q] for q in sorted(rows)], build_rows
