"""The topic catalogue (docs/architecture.md, "Topics") and the one place that calls Kafka's admin API.

``Catalogue(config)`` names every topic of a namespace; ``apply()`` creates what is missing, is
idempotent, and refuses to run when a sharded topic (commands, history, state) exists with a
different partition count, because workflow IDs hash to those partitions for ever.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from .config import KafkaConfig
from .errors import BrokerUnavailableError, KafkaAuthorizationError, PartitionMismatchError, TopicError
from .kafka_access import ClientErrors, authorization_error, describe_principal, metadata, refusal_of
from .priority import DEFAULT_LEVEL, LEVELS

__all__ = ["TIMER_TIERS_MS", "ApplyReport", "Catalogue", "TopicSpec"]

log = logging.getLogger(__name__)

DAY_MS = 86_400_000
#: delay tiers of the timer service (docs/architecture.md, "Timers"): name -> delay in ms
TIMER_TIERS_MS = {"1s": 1_000, "10s": 10_000, "1m": 60_000, "10m": 600_000, "1h": 3_600_000, "1d": DAY_MS}


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    config: dict[str, Any] = field(default_factory=dict)
    #: a sharded topic's partition count can never change
    sharded: bool = False


@dataclass
class ApplyReport:
    created: list[str] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class Catalogue:
    """Names and specs of a namespace's topics."""

    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        ns = config.namespace
        self.commands = f"{ns}.commands"
        self.history = f"{ns}.history"
        self.state = f"{ns}.state"
        self.replies = f"{ns}.replies"
        self.dlq = f"{ns}.dlq"
        #: compacted, key = task queue: the worker build that new workflows of the queue start on
        self.builds = f"{ns}.builds"
        #: compacted, key = task queue: the queue's activity rate limits (``kadence.topics.queue_limits``)
        self.queue_limits = f"{ns}.queue_limits"
        #: compacted, partitioned as the commands, key = a concurrency limit's key: its holders and
        #: waiters, written by the processor that owns the key's partition (``processors.concurrency``)
        self.concurrency = f"{ns}.concurrency"
        #: what workflows publish (``kadence.processors.streams``), key = workflow ID, partitioned
        #: by Kafka's default partitioner over its own partition count; the processor writes it
        #: (and creates it when missing), clients and the gateway read it
        self.streams = f"{ns}.streams"
        self.processor_group = f"{ns}.processor"
        #: the error callback of the last admin client made by ``admin()``
        self._errors: ClientErrors | None = None

    def workflow_tasks(self, queue: str) -> str:
        return f"{self.config.namespace}.tasks.workflow.{queue}"

    def build_tasks(self, queue: str, build_id: str) -> str:
        """Workflow tasks of runs pinned to ``build_id`` (build IDs have no dots, so the build is
        the name's last segment; see ``kadence.topics.builds``)."""
        return f"{self.config.namespace}.tasks.build.{queue}.{build_id}"

    def build_tasks_prefix(self) -> str:
        return f"{self.config.namespace}.tasks.build."

    def build_group(self, queue: str, build_id: str) -> str:
        """The consumer group of the workers of one build (their committed offsets give the build's backlog)."""
        return f"{self.config.namespace}.worker.build.{queue}.{build_id}"

    def activity_tasks(self, queue: str) -> str:
        return f"{self.config.namespace}.tasks.activity.{queue}"

    def activity_lane(self, queue: str, level: int) -> str:
        """The activity-task topic of one priority level of a queue (``kadence.topics.priority``):
        the default level's is ``activity_tasks``; the others' names cannot be a queue's, whose
        topics all start ``{ns}.tasks.activity.``."""
        if level == DEFAULT_LEVEL:
            return self.activity_tasks(queue)
        return f"{self.config.namespace}.tasks.activity-p{level}.{queue}"

    def activity_lanes(self, queue: str) -> list[tuple[int, str]]:
        """(level, topic) of every priority lane of a queue, first level first."""
        return [(level, self.activity_lane(queue, level)) for level in LEVELS]

    def workflow_lane(self, queue: str, level: int, build_id: str | None = None) -> str:
        """The workflow-task topic of one priority level of a queue's unversioned runs (or of
        one build's): the default level's is ``workflow_tasks`` (``build_tasks``); the others'
        names cannot be a queue's or a build's (``tasks.workflow-p1.``, ``tasks.build-p1.``)."""
        if level == DEFAULT_LEVEL:
            return self.workflow_tasks(queue) if build_id is None else self.build_tasks(queue, build_id)
        if build_id is None:
            return f"{self.config.namespace}.tasks.workflow-p{level}.{queue}"
        return f"{self.config.namespace}.tasks.build-p{level}.{queue}.{build_id}"

    def workflow_lanes(self, queue: str, build_id: str | None = None) -> list[tuple[int, str]]:
        """(level, topic) of every priority lane of a queue's (or a build's) workflow tasks."""
        return [(level, self.workflow_lane(queue, level, build_id)) for level in LEVELS]

    def timers(self, tier: str) -> str:
        return f"{self.config.namespace}.timers.{tier}"

    def worker_group(self, queue: str, kind: str) -> str:
        return f"{self.config.namespace}.worker.{kind}.{queue}"

    # -- specs ---------------------------------------------------------------------------------

    def core_specs(self) -> list[TopicSpec]:
        p = self.config.partitions
        compact = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.2", "segment.ms": str(DAY_MS)}
        specs = [
            TopicSpec(self.commands, p, {"cleanup.policy": "delete", "retention.ms": str(30 * DAY_MS)}, True),
            TopicSpec(self.history, p, dict(compact), True),
            TopicSpec(self.state, p, dict(compact), True),
            TopicSpec(self.replies, p, {"cleanup.policy": "delete", "retention.ms": str(DAY_MS)}),
            TopicSpec(self.dlq, p, {"cleanup.policy": "delete", "retention.ms": str(30 * DAY_MS)}),
            TopicSpec(self.builds, p, dict(compact)),
            TopicSpec(self.queue_limits, p, dict(compact)),
            TopicSpec(self.concurrency, p, dict(compact), True),
            TopicSpec(self.streams, p, {"cleanup.policy": "delete", "retention.ms": str(7 * DAY_MS)}),
        ]
        for tier in TIMER_TIERS_MS:
            specs.append(
                TopicSpec(self.timers(tier), p, {"cleanup.policy": "delete", "retention.ms": str(30 * DAY_MS)})
            )
        return specs

    def processor_topics(self) -> list[str]:
        """The core topics a processor needs at start: not the queue limits, which only workers
        read (and create when missing, so an upgraded namespace needs no ``topics apply`` for
        them), nor the concurrency limits' or the streams' topic, which the processor creates
        when missing (``concurrency_spec``, ``streams_spec``)."""
        return [s.name for s in self.core_specs() if s.name not in (self.queue_limits, self.concurrency, self.streams)]

    def concurrency_spec(self) -> TopicSpec:
        return next(s for s in self.core_specs() if s.name == self.concurrency)

    def streams_spec(self) -> TopicSpec:
        return next(s for s in self.core_specs() if s.name == self.streams)

    def late_specs(self, have: dict[str, int]) -> list[TopicSpec]:
        """The topics a processor creates when its namespace (``have``: ``existing()``) was made
        before them: the concurrency limits' and the streams', partitioned as the commands."""
        return [
            replace(spec, partitions=have[self.commands])
            for spec in (self.concurrency_spec(), self.streams_spec())
            if spec.name not in have
        ]

    def queue_specs(self, queue: str) -> list[TopicSpec]:
        p = self.config.partitions
        conf = {"cleanup.policy": "delete", "retention.ms": str(7 * DAY_MS)}
        lanes = self.workflow_lanes(queue) + self.activity_lanes(queue)
        return [TopicSpec(topic, p, conf) for _level, topic in lanes]

    def build_specs(self, queue: str, build_id: str) -> list[TopicSpec]:
        conf = {"cleanup.policy": "delete", "retention.ms": str(7 * DAY_MS)}
        return [
            TopicSpec(topic, self.config.partitions, conf) for _level, topic in self.workflow_lanes(queue, build_id)
        ]

    # -- admin ---------------------------------------------------------------------------------

    def admin(self) -> AdminClient:
        """An admin client whose authentication and TLS failures this catalogue reports
        (``KafkaAuthenticationError`` where the broker seemed not to answer)."""
        conf = self.config.base()
        self._errors = conf["error_cb"]
        return AdminClient(conf)

    def _metadata(self, admin: AdminClient, what: str, timeout: float, topic: str | None = None) -> Any:
        """``admin.list_topics``, a refused login raised within a second as its typed error."""
        try:
            return metadata(admin, {"error_cb": self._errors}, timeout=timeout, topic=topic)
        except KafkaException as exc:
            raise self._unavailable(admin, what, exc) from exc

    def _unavailable(self, admin: AdminClient, what: str, exc: KafkaException) -> Exception:
        """The error for a request that failed: the client's refused login or TLS handshake, if
        it saw one, else ``BrokerUnavailableError``."""
        refused = refusal_of({"error_cb": self._errors}, admin)
        return refused or BrokerUnavailableError(f"{what} at {self.config.bootstrap}: {exc}")

    def existing(self, admin: AdminClient | None = None, timeout: float = 10.0) -> dict[str, int]:
        """Topic name -> partition count, for this namespace's topics (those the principal may
        describe: a broker with ACLs leaves the others out)."""
        admin = admin or self.admin()
        md = self._metadata(admin, "cannot list topics", timeout)
        prefix = self.config.namespace + "."
        return {name: len(t.partitions) for name, t in md.topics.items() if name.startswith(prefix)}

    def require(self, names: list[str], admin: AdminClient | None = None, timeout: float = 10.0) -> dict[str, int]:
        """``existing()``, checked to hold every topic in ``names``. One that is not there is a
        ``TopicError`` (run ``kadence topics apply``), or a ``KafkaAuthorizationError`` naming
        the ACL to grant when the broker says the principal may not describe it."""
        admin = admin or self.admin()
        have = self.existing(admin, timeout)
        missing = [name for name in names if name not in have]
        if not missing:
            return have
        for name in missing:
            t = self._metadata(admin, f"cannot describe topic {name}", timeout, topic=name).topics.get(name)
            error = t.error if t is not None else None
            denied = error is not None and authorization_error(
                error, resource=name, namespace=self.config.namespace, security=self.config.security
            )
            if denied:
                raise denied
        raise TopicError(f"topics missing: {', '.join(missing)} (run `kadence topics apply`)")

    def apply(self, specs: list[TopicSpec] | None = None, timeout: float = 30.0) -> ApplyReport:
        """Create missing topics; refuse a partition-count mismatch on sharded topics."""
        specs = self.core_specs() if specs is None else specs
        admin = self.admin()
        have = self.existing(admin)
        report = ApplyReport()
        missing = []
        for spec in specs:
            if spec.name not in have:
                missing.append(spec)
                continue
            report.existing.append(spec.name)
            if have[spec.name] != spec.partitions:
                if spec.sharded:
                    raise PartitionMismatchError(spec.name, spec.partitions, have[spec.name])
                report.warnings.append(f"{spec.name} has {have[spec.name]} partitions (catalogue: {spec.partitions})")
        if missing:
            isr = {"min.insync.replicas": str(self.config.topic_min_insync_replicas)}
            futures = admin.create_topics(
                [NewTopic(s.name, s.partitions, self.config.replication, config={**isr, **s.config}) for s in missing],
                operation_timeout=timeout,
                request_timeout=timeout,
            )
            for name, fut in futures.items():
                try:
                    fut.result(timeout)
                    report.created.append(name)
                except KafkaException as exc:
                    err = exc.args[0]
                    if err.name() == "TOPIC_ALREADY_EXISTS":  # created concurrently: check again below
                        report.existing.append(name)
                        continue
                    if err.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED):
                        raise KafkaAuthorizationError(
                            f"{describe_principal(self.config.security)} may not create topic {name} ({err.str()}): "
                            f"grant it CREATE on topics with the prefix '{self.config.namespace}.', or have an "
                            "administrator run `kadence topics apply` (docs/deploy.md, 'ACLs')"
                        ) from exc
                    if _broker_not_answering(err):  # a restart or a starved broker: retry, don't exit
                        raise self._unavailable(admin, f"cannot create topic {name}", exc) from exc
                    raise TopicError(f"cannot create topic {name}: {err.str()}") from exc
            # a concurrent creator may have used another count: verify sharded topics again, once
            # the broker's metadata shows the topics that already existed (it can lag a creation)
            raced = [s.name for s in missing if s.name in report.existing]
            deadline = time.monotonic() + timeout
            have = self.existing(admin)
            while any(name not in have for name in raced) and time.monotonic() < deadline:
                time.sleep(0.05)
                have = self.existing(admin)
            for spec in missing:
                if spec.sharded and have.get(spec.name) not in (None, spec.partitions):
                    raise PartitionMismatchError(spec.name, spec.partitions, have[spec.name])
        if report.created:
            self._wait_ready(admin, report.created, timeout)
        for name in report.created:
            log.info("created topic %s", name)
        return report

    def _wait_ready(self, admin: AdminClient, names: list[str], timeout: float) -> None:
        """Wait until every partition of the new topics has a leader (metadata settles)."""
        deadline = time.monotonic() + timeout
        pending = set(names)
        while pending:
            try:
                md = admin.list_topics(timeout=timeout)
            except KafkaException as exc:
                raise self._unavailable(admin, "cannot list topics", exc) from exc
            for name in list(pending):
                t = md.topics.get(name)
                if (
                    t is not None
                    and t.error is None
                    and t.partitions
                    and all(pm.leader >= 0 and pm.error is None for pm in t.partitions.values())
                ):
                    pending.discard(name)
            if pending:
                if time.monotonic() > deadline:  # created, but the broker elects no leader in time
                    raise BrokerUnavailableError(f"topics not ready after {timeout}s: {', '.join(sorted(pending))}")
                time.sleep(0.05)

    def ensure_queue(self, queue: str) -> ApplyReport:
        """The queue's task topics, and the queue-limits topic its workers follow."""
        return self.apply(self.queue_specs(queue) + self._limits_spec())

    def ensure_build(self, queue: str, build_id: str) -> ApplyReport:
        """The queue's topics, the workflow-task topic of one build of it, and the queue-limits topic."""
        return self.apply(self.queue_specs(queue) + self.build_specs(queue, build_id) + self._limits_spec())

    def _limits_spec(self) -> list[TopicSpec]:
        return [s for s in self.core_specs() if s.name == self.queue_limits]

    def partitions_of(self, topic: str, admin: AdminClient | None = None, settle: float = 10.0) -> int:
        """The partition count of ``topic``, one this process has just applied. A cluster's
        brokers learn of a creation one by one, so the broker that answers may not list it yet
        (a worker on a three-node cluster stopped on that): it is looked for again for up to
        ``settle`` seconds before ``require`` calls it missing."""
        admin = admin or self.admin()
        deadline = time.monotonic() + settle
        while True:
            have = self.existing(admin)
            if topic in have:
                return have[topic]
            if time.monotonic() >= deadline:
                return self.require([topic], admin)[topic]
            time.sleep(0.1)


#: what a create-topics result says when the broker (or its controller) did not answer, as
#: opposed to a refusal (a policy, a bad config, too many partitions)
_NOT_ANSWERING = {
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NOT_CONTROLLER,
    KafkaError._ALL_BROKERS_DOWN,
}


def _broker_not_answering(err: KafkaError) -> bool:
    return err.code() in _NOT_ANSWERING or err.retriable()
