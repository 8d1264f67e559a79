"""Worker builds (build-ID pinning), shared by the processor, the SDK's worker and the CLI.

* A build ID names one deployment of a task queue's workflow code: ``[A-Za-z0-9][A-Za-z0-9_-]*``,
  at most 64 characters (no dots: the build is the last segment of its topic's name).
* ``{ns}.builds`` (compacted, key = task queue) holds ``BuildDefault`` records: the build that
  NEW workflows of the queue start on (null: unversioned). ``promote_build`` writes one.
* A run pinned to build B gets its workflow tasks on ``{ns}.tasks.build.{queue}.{B}``, consumed by
  the group ``{ns}.worker.build.{queue}.{B}``; its backlog is the topic's end offsets minus that
  group's committed offsets. Tasks for a build no worker serves stay there, visible as backlog
  (``BacklogProbe``), until workers of the build return or an operator moves the workflows.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from . import serde
from .catalogue import Catalogue
from .config import KafkaConfig
from .errors import BrokerUnavailableError, ConfigError
from .records import now_ms
from .scan import scan

__all__ = [
    "BUILD_ID_RE",
    "BacklogProbe",
    "BuildBacklog",
    "build_backlogs",
    "build_topics",
    "promote_build",
    "read_build_defaults",
    "validate_build_id",
]

log = logging.getLogger(__name__)

BUILD_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def validate_build_id(build_id: str | None, *, allow_none: bool = False) -> str | None:
    """The build ID if it is well formed; ``ConfigError`` naming the rule otherwise."""
    if build_id is None and allow_none:
        return None
    if not isinstance(build_id, str) or not BUILD_ID_RE.match(build_id):
        raise ConfigError(
            f"build ID {build_id!r} is invalid: use 1-64 characters from A-Z a-z 0-9 _ -, "
            "starting with a letter or digit (no dots: e.g. v1_4_2 or a commit hash)"
        )
    return build_id


def promote_build(
    config: KafkaConfig, task_queue: str, build_id: str | None, *, identity: str = "", timeout: float = 30.0
) -> dict[str, Any]:
    """Make ``build_id`` the build that new workflows of ``task_queue`` start on (None: unversioned).

    Open workflows stay on the build they are pinned to. Creates the build's task topic first, so
    that tasks dispatched before its workers start wait there. Returns the record written."""
    if not task_queue:
        raise ConfigError("task queue must be a non-empty string")
    validate_build_id(build_id, allow_none=True)
    cat = Catalogue(config)
    cat.apply([s for s in cat.core_specs() if s.name == cat.builds])
    if build_id is not None:
        cat.ensure_build(task_queue, build_id)
    record = {
        "task_queue": task_queue,
        "build_id": build_id,
        "timestamp_ms": now_ms(),
        "identity": identity,
    }
    producer = Producer(config.producer(**{"linger.ms": 0}))
    errors: list[Any] = []
    producer.produce(
        cat.builds,
        serde.encode("BuildDefault", record),
        task_queue.encode(),
        on_delivery=lambda err, _m: errors.append(err),
    )
    left = producer.flush(timeout)
    if left or not errors or errors[0] is not None:
        raise BrokerUnavailableError(
            f"promoting build {build_id!r} of {task_queue!r} failed: "
            f"{errors[0].str() if errors and errors[0] else 'not acknowledged'}"
        )
    log.info("task queue %s: new workflows start on build %s", task_queue, build_id or "(unversioned)")
    return record


def read_build_defaults(config: KafkaConfig) -> dict[str, dict[str, Any]]:
    """Task queue -> its latest ``BuildDefault`` record."""
    out: dict[str, dict[str, Any]] = {}
    for msg in scan(config, Catalogue(config).builds):
        if msg.key() is None:
            continue
        if msg.value() is None:
            out.pop(msg.key().decode(), None)
        else:
            out[msg.key().decode()] = serde.decode("BuildDefault", msg.value())
    return out


def build_topics(cat: Catalogue, have: dict[str, int]) -> list[tuple[str, str | None, str]]:
    """(task queue, build ID or None for the unversioned queue, topic) of every workflow-task topic."""
    ns = cat.config.namespace
    unversioned, versioned = f"{ns}.tasks.workflow.", cat.build_tasks_prefix()
    out: list[tuple[str, str | None, str]] = []
    for name in sorted(have):
        if name.startswith(unversioned):
            out.append((name[len(unversioned) :], None, name))
        elif name.startswith(versioned) and "." in name[len(versioned) :]:
            queue, build = name[len(versioned) :].rsplit(".", 1)
            out.append((queue, build, name))
    return out


@dataclass(frozen=True)
class BuildBacklog:
    task_queue: str
    #: None: the queue's unversioned workflow tasks
    build_id: str | None
    topic: str
    #: new workflows of the queue start on this build
    is_default: bool
    #: workflow tasks waiting for a worker of this build (end offsets minus committed offsets)
    backlog: int
    #: seconds since the oldest waiting task was dispatched (None: nothing waits, or not measured)
    oldest_age_s: float | None


class BacklogProbe:
    """Measures the workflow-task backlog of every build. Holds a consumer and an admin client;
    use from one thread, ``close()`` when done."""

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

    def measure(self, task_queue: str | None = None) -> list[BuildBacklog]:
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
                tps = [TopicPartition(topic, p) for p in range(have[topic])]
                committed = self._committed(group, tps)
                ranges = {}
                for tp in tps:
                    low, high = self._consumer.get_watermark_offsets(tp, timeout=self.timeout)
                    start = max(committed.get(tp.partition, -1), low)
                    if high > start:
                        ranges[tp.partition] = (start, high)
                backlog, age = 0, None
                if ranges:
                    backlog, ts = self._waiting(ranges, topic)
                    age = max(0.0, (now_ms() - ts) / 1000) if ts is not None else None
                out.append(BuildBacklog(queue, build, topic, defaults.get(queue) == build, backlog, age))
            return out
        except KafkaException as exc:
            raise BrokerUnavailableError(f"cannot measure build backlogs: {exc}") from exc


def build_backlogs(config: KafkaConfig, task_queue: str | None = None) -> list[BuildBacklog]:
    """The backlog of every build (and of the unversioned queue) of every queue, or of one queue."""
    probe = BacklogProbe(config)
    try:
        return probe.measure(task_queue)
    finally:
        probe.close()
