"""Inbound bridges: records of domain topics become workflow starts or signals.

A bridge consumes its source topics (read_committed, at least once, consumer group
``{ns}.bridge.{name}``) and, per record, produces one command to ``{ns}.commands``:

* ``start``: ``StartWorkflow`` of ``workflow_type`` on ``task_queue``; the workflow ID comes from
  a field of the JSON record (``workflow_id_field``, a dotted path) or, without one, from the
  record's origin ``{topic}-{partition}-{offset}``;
* ``signal``: ``SignalWorkflow`` named ``signal`` to the workflow whose ID is in the record.

The command's request ID is ``bridge:{topic}:{partition}:{offset}`` (or a field of the record,
``request_id_field``), so a redelivered or replayed record is answered by the engine with its
first result and changes nothing; a start also uses the ``reject_duplicate`` reuse policy by
default, so the same business key delivered twice (two offsets) starts one workflow. Offsets are
committed only after Kafka acknowledged every command of the batch.

A record that cannot be mapped (not a JSON object, no workflow ID) goes to ``{ns}.dlq`` with the
reason and its origin, and the partition keeps moving.

Configuration (TOML)::

    [bridge]
    name = "orders"

    [[mappings]]
    topic = "orders.created"
    action = "start"
    workflow_type = "FulfilOrder"
    task_queue = "orders"
    workflow_id_field = "order_id"
    workflow_id_prefix = "order-"

    [[mappings]]
    topic = "orders.shipped"
    action = "signal"
    signal = "shipped"
    workflow_id_field = "order_id"
    workflow_id_prefix = "order-"
    input_field = "tracking"
"""

from __future__ import annotations

import collections
import json
import logging
import os
import re
import threading
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, Producer, TopicPartition
from prometheus_client import CollectorRegistry, Counter

from kadence.schemas.records import SignalWorkflow, StartWorkflow
from kadence.storage import open_large_payloads
from kadence.topics import serde
from kadence.topics.batch_producer import BatchProducer
from kadence.topics.broker_wait import assign_at_committed, committed_offsets, until_broker_answers
from kadence.topics.catalogue import Catalogue
from kadence.topics.config import KafkaConfig
from kadence.topics.consumer_lag import LagSampler, lag_gauge
from kadence.topics.errors import BrokerUnavailableError, ConfigError, KadenceError, SchemaError
from kadence.topics.identifiers import MAX_ID_LENGTH, check_name, check_task_queue, problem
from kadence.topics.large_payloads import LargePayloadConfig
from kadence.topics.payload import JsonConverter, PayloadConverter
from kadence.topics.polling import poll_ready
from kadence.topics.protocol import ID_REUSE_POLICIES, signal_body, start_body
from kadence.topics.records import command, now_ms

from .offsets import commit_positions

__all__ = ["BadRecord", "Bridge", "BridgeConfig", "Mapping", "load_bridge_config", "map_record"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")

_NAME = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


@dataclass(frozen=True, kw_only=True)
class Mapping:
    topic: str
    action: str  # "start" | "signal"
    workflow_type: str | None = None
    task_queue: str | None = None
    signal: str | None = None
    #: dotted path of the workflow ID in the JSON record; None: ``{topic}-{partition}-{offset}``
    workflow_id_field: str | None = None
    workflow_id_prefix: str = ""
    #: dotted path of the workflow's argument; None: the whole record
    input_field: str | None = None
    #: dotted path of a request ID in the record; None: ``bridge:{topic}:{partition}:{offset}``
    request_id_field: str | None = None
    id_reuse_policy: str = "reject_duplicate"

    def __post_init__(self) -> None:
        where = f"mapping of topic {self.topic!r}"
        if not self.topic or not _NAME.match(self.topic):
            raise ConfigError(f"{where}: a topic name is required")
        if self.action == "start":
            if not self.workflow_type or not self.task_queue:
                raise ConfigError(f"{where}: action start needs workflow_type and task_queue")
            if self.id_reuse_policy not in ID_REUSE_POLICIES:
                raise ConfigError(f"{where}: id_reuse_policy must be one of {', '.join(ID_REUSE_POLICIES)}")
            _checked(
                where,
                lambda: (check_name(self.workflow_type, field="workflow_type"), check_task_queue(self.task_queue)),
            )
        elif self.action == "signal":
            if not self.signal:
                raise ConfigError(f"{where}: action signal needs signal (the signal name)")
            _checked(where, lambda: check_name(self.signal, field="signal"))
            if not self.workflow_id_field:
                raise ConfigError(f"{where}: action signal needs workflow_id_field (which workflow to signal)")
        else:
            raise ConfigError(f"{where}: action must be start or signal, not {self.action!r}")


@dataclass(frozen=True, kw_only=True)
class BridgeConfig:
    kafka: KafkaConfig
    name: str
    mappings: tuple[Mapping, ...]
    #: most records per batch (one flush and one offset commit per batch)
    max_batch: int = 500
    identity: str = field(default="bridge")
    #: the payload codec the applications use (``kadence --codec`` / KADENCE_CODEC): the inputs
    #: of the starts and signals the bridge sends are encoded with it, so that workers read them
    codec: Any = None
    #: KADENCE_PAYLOAD_*: where inputs over the size threshold are stored (as the clients do)
    large_payloads: LargePayloadConfig = field(default_factory=LargePayloadConfig)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ConfigError(f"bridge name {self.name!r} must match {_NAME.pattern}")
        if not self.mappings:
            raise ConfigError("a bridge needs at least one [[mappings]] entry")
        topics = [m.topic for m in self.mappings]
        if len(set(topics)) != len(topics):
            raise ConfigError("one mapping per source topic")

    def mapping_for(self, topic: str) -> Mapping:
        return next(m for m in self.mappings if m.topic == topic)


def load_bridge_config(
    path: str | os.PathLike[str],
    kafka: KafkaConfig,
    *,
    codec: Any = None,
    large_payloads: LargePayloadConfig | None = None,
) -> BridgeConfig:
    """Read a TOML bridge configuration (see the module's docstring); ``codec``: the payload
    codec its commands' inputs are encoded with; ``large_payloads``: where the large ones go."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read bridge config {path}: {exc}") from exc
    section = data.get("bridge", {})
    known = set(Mapping.__dataclass_fields__)
    mappings = []
    for i, entry in enumerate(data.get("mappings", [])):
        unknown = set(entry) - known
        if unknown:
            raise ConfigError(f"{path}: mappings[{i}] has unknown keys {sorted(unknown)}")
        try:
            mappings.append(Mapping(**entry))
        except TypeError as exc:
            raise ConfigError(f"{path}: mappings[{i}]: {exc}") from exc
    return BridgeConfig(
        kafka=kafka,
        name=section.get("name", "default"),
        mappings=tuple(mappings),
        max_batch=int(section.get("max_batch", 500)),
        identity=f"bridge:{section.get('name', 'default')}",
        codec=codec,
        large_payloads=large_payloads or LargePayloadConfig(),
    )


def _checked(where: str, check: Callable[[], object]) -> None:
    """A mapping's names, checked as the SDK checks them; a bad one is a ConfigError at load."""
    try:
        check()
    except KadenceError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


class BadRecord(KadenceError):
    """A source record that cannot be mapped to a command (the reason goes to the DLQ)."""


def _field(record: Any, path: str) -> Any:
    value = record
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise BadRecord(f"field {path!r} is missing")
        value = value[part]
    return value


def _scalar_id(value: Any, path: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise BadRecord(f"field {path!r} must be a non-empty string or an integer, not {type(value).__name__}")
    return str(value)


def map_record(
    mapping: Mapping,
    topic: str,
    partition: int,
    offset: int,
    value: bytes | None,
    converter: PayloadConverter,
    identity: str = "bridge",
) -> tuple[str, str, StartWorkflow | SignalWorkflow, str]:
    """(workflow_id, body_type, body, request_id) for one source record; ``BadRecord`` if it
    cannot be mapped. Pure: the same record always maps to the same command."""
    if value is None:
        raise BadRecord("the record has no value")
    try:
        record = json.loads(value)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRecord(f"not JSON: {exc}") from exc
    if not isinstance(record, dict):
        raise BadRecord(f"not a JSON object but a {type(record).__name__}")
    if mapping.workflow_id_field:
        wf = mapping.workflow_id_prefix + _scalar_id(
            _field(record, mapping.workflow_id_field), mapping.workflow_id_field
        )
    else:
        wf = f"{mapping.workflow_id_prefix}{topic}-{partition}-{offset}"
    why = problem(wf, max_length=MAX_ID_LENGTH, slash=True)
    if why:
        raise BadRecord(f"workflow ID from field {mapping.workflow_id_field!r} {why}")
    if mapping.request_id_field:
        rid = f"bridge:{_scalar_id(_field(record, mapping.request_id_field), mapping.request_id_field)}"
    else:
        rid = f"bridge:{topic}:{partition}:{offset}"
    arg = record if mapping.input_field is None else _field(record, mapping.input_field)
    try:
        payload = converter.to_bytes([arg])
    except SchemaError as exc:  # pragma: no cover - parsed JSON always serializes
        raise BadRecord(str(exc)) from exc
    if mapping.action == "start":
        # a start mapping has both (Mapping refuses one without them)
        assert mapping.workflow_type is not None and mapping.task_queue is not None
        body = start_body(mapping.workflow_type, mapping.task_queue, payload, id_reuse_policy=mapping.id_reuse_policy)
        return wf, "StartWorkflow", body, rid
    assert mapping.signal is not None  # a signal mapping has it (Mapping refuses one without)
    return (
        wf,
        "SignalWorkflow",
        signal_body(mapping.signal, payload, identity=identity),
        rid,
    )


class Bridge:
    """Runs one bridge configuration. ``run()`` blocks until ``stop()``."""

    def __init__(
        self,
        config: BridgeConfig,
        *,
        registry: CollectorRegistry | None = None,
        producer_factory: Callable[[dict[str, Any]], Producer] = Producer,
    ) -> None:
        self.config = config
        r = registry or CollectorRegistry()
        self._records = Counter(
            "kadence_bridge_records",
            "source records handled, by outcome",
            ["namespace", "bridge", "topic", "outcome"],
            registry=r,
        )
        self._lag = LagSampler(lag_gauge(r), config.kafka.namespace, "bridge")
        self.kafka = config.kafka
        self.topics = Catalogue(config.kafka)
        self._cmd_codec = serde.topic_codec("Command", self.topics.commands, config.kafka.schema_registry_url)
        self.converter = JsonConverter(config.codec, large=open_large_payloads(config.large_payloads))
        self._stop = threading.Event()
        self._producer = BatchProducer(
            self.kafka.producer(**{"linger.ms": 5}), who=f"bridge {config.name}", factory=producer_factory
        )
        self._queues_known: set[str] = set()
        self.forwarded = 0
        self.dead_lettered = 0

    def stop(self) -> None:
        self._stop.set()

    def _until_broker_answers(self, what: str, step: Callable[[], _T]) -> _T:
        """``step()``, retried with backoff while the broker does not answer (a bridge started
        before the broker, or one meeting a restart), instead of exiting (issue 16)."""
        return until_broker_answers(step, what=what, who=f"bridge {self.config.name}", stop=self._stop, log=log)

    def _check_topics(self) -> None:
        self.topics.require([self.topics.commands, self.topics.dlq])
        for m in self.config.mappings:  # task topics must exist before a worker polls them
            if m.action == "start" and m.task_queue is not None and m.task_queue not in self._queues_known:
                self.topics.ensure_queue(m.task_queue)
                self._queues_known.add(m.task_queue)

    def run(self) -> None:
        try:
            self._until_broker_answers("checking topics", self._check_topics)
        except BrokerUnavailableError:
            if self._stop.is_set():  # stopped while it waited: nothing was consumed
                return
            raise
        consumer = Consumer(
            self.kafka.consumer(
                f"{self.kafka.namespace}.bridge.{self.config.name}",
                **{
                    "session.timeout.ms": 6000,
                    "partition.assignment.strategy": "cooperative-sticky",
                    "topic.metadata.refresh.interval.ms": 5000,
                },
            )
        )
        consumer.subscribe([m.topic for m in self.config.mappings], on_assign=self._on_assign)
        log.info(
            "bridge %s started: %s",
            self.config.name,
            ", ".join(f"{m.topic} -> {m.action}" for m in self.config.mappings),
        )
        try:
            while not self._stop.is_set():
                msgs = []
                self._lag.sample(consumer)
                for m in poll_ready(consumer, self.config.max_batch, 0.2):
                    err = m.error()
                    if err is None:
                        msgs.append(m)
                    elif err.fatal():  # a dead consumer: exit and be restarted
                        raise KafkaException(err)
                if not msgs:
                    continue
                if self.forward(msgs):
                    commit_positions(consumer)
                else:
                    self._rewind(consumer)
                    self._stop.wait(1.0)
        except KafkaException as exc:
            raise KadenceError(f"bridge {self.config.name} stopped: {exc}") from exc
        finally:
            consumer.close()
            self._producer.close(10)
            log.info(
                "bridge %s stopped (%d forwarded, %d dead-lettered)",
                self.config.name,
                self.forwarded,
                self.dead_lettered,
            )

    def forward(self, msgs: list[Message]) -> bool:
        """Produce the command (or dead letter) of every record; True once Kafka acknowledged all."""
        forwarded = dead = 0
        outcomes: collections.Counter[tuple[str, str]] = collections.Counter()
        for msg in msgs:
            # (records of a poll, not errors: each has its topic, partition and offset)
            topic, partition, offset = msg.topic() or "", msg.partition() or 0, msg.offset() or 0
            mapping = self.config.mapping_for(topic)
            try:
                wf, body_type, body, rid = map_record(
                    mapping,
                    topic,
                    partition,
                    offset,
                    msg.value(),
                    self.converter,
                    self.config.identity,
                )
            except BadRecord as exc:
                self._producer.produce(
                    self.topics.dlq,
                    serde.encode(
                        "DeadLetter",
                        {
                            "origin_topic": msg.topic(),
                            "origin_partition": msg.partition(),
                            "origin_offset": msg.offset(),
                            "key": msg.key(),
                            "value": msg.value(),
                            "reason": f"bridge {self.config.name}: {exc}"[:2000],
                            "error_type": "BadRecord",
                            "component": f"bridge:{self.config.name}",
                            "timestamp_ms": now_ms(),
                        },
                    ),
                    msg.key(),
                )
                log.warning(
                    "bridge %s: dead-lettered %s[%d]@%d: %s",
                    self.config.name,
                    msg.topic(),
                    msg.partition(),
                    msg.offset(),
                    exc,
                )
                dead += 1
                outcomes[(topic, "dead_lettered")] += 1
                continue
            cmd = command(wf, body_type, body, request_id=rid)
            self._producer.produce(self.topics.commands, self._cmd_codec.encode(cmd), wf.encode())
            forwarded += 1
            outcomes[(topic, body_type)] += 1
        failure = self._producer.flush(30)
        if failure is not None:
            log.error("bridge %s: %s; the batch is retried", self.config.name, failure)
            return False
        self.forwarded += forwarded
        self.dead_lettered += dead
        for (topic, outcome), n in outcomes.items():
            self._records.labels(self.kafka.namespace, self.config.name, topic, outcome).inc(n)
        return True

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Assigned here at the committed offsets, so librdkafka sends no query of its own (one
        refused with NOT_COORDINATOR is never retried: librdkafka #5586)."""
        if not partitions:
            return
        try:
            assign_at_committed(
                consumer,
                partitions,
                timeout=30,
                what="the bridge's source",
                who=f"bridge {self.config.name}",
                stop=self._stop,
                log=log,
            )
        except BrokerUnavailableError:  # stopping: the partitions are given up unread
            return

    def _rewind(self, consumer: Consumer) -> None:
        """Back to the committed offsets, so the batch that was not acknowledged is read again
        (waiting while the broker does not answer: going on from the position would skip it)."""
        assignment = consumer.assignment()
        if not assignment:
            return

        try:
            offsets = self._until_broker_answers(
                "rewinding", lambda: committed_offsets(consumer, assignment, 30, "the bridge's source")
            )
        except BrokerUnavailableError:  # stopped while it waited: the batch was not committed
            return
        for tp in offsets:
            if tp.offset < 0:
                tp.offset = OFFSET_BEGINNING
            try:
                consumer.seek(tp)
            except KafkaException as exc:
                log.warning("bridge %s: seek %s[%d] failed: %s", self.config.name, tp.topic, tp.partition, exc)
