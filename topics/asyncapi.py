"""The topic contracts as an AsyncAPI 3 document (issue 48 item 2), generated from the catalogue
(``kadence.topics.catalogue``) and the current schemas (``kadence.schemas``).

``document()`` describes every topic of a namespace: its address (``{namespace}.commands``, with
the task queue, build or timer tier as parameters), key, partitioning rule, cleanup policy, the
Avro schema of its records (self-contained: each named type defined at its first use), and which
Kadence components write and read it; the operations are what a service outside Kadence does
(start and signal workflows on ``commands``, read ``replies`` and ``history``). ``docs/asyncapi.yaml``
is its output (``kadence topics asyncapi -o docs/asyncapi.yaml``); a unit test fails when the
two differ, and a broker-free test validates the file with the AsyncAPI parser
(``tools/asyncapi``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml  # type: ignore[import-untyped]  # (no stubs in the lock; one call)

from kadence.schemas import CURRENT_VERSION, load_schema_set

from .schema_registry import PUBLIC_RECORDS
from .serde import MAGIC
from .standalone_schemas import self_contained

__all__ = ["CLIENT_RECORDS", "TOPICS", "TopicContract", "client_schemas", "document", "render", "self_contained"]

#: the records a client in another language writes (Command) and reads (Reply, HistoryEvent)
CLIENT_RECORDS = ("Command", "Reply", "HistoryEvent", "StreamRecord")

AVRO = "application/vnd.apache.avro;version=1.9.0"
_DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class TopicContract:
    """One topic (or family of topics) of a namespace."""

    channel: str
    address: str
    record: str
    key: str
    partitioning: str
    cleanup: str
    writers: tuple[str, ...]
    readers: tuple[str, ...]
    description: str
    retention_ms: int | None = None
    public: bool = False


_BY_WORKFLOW = (
    "Kafka's default partitioner: murmur2 of the key (the workflow ID, UTF-8) modulo the partition "
    "count, as the Java client computes it (librdkafka: partitioner=murmur2_random; "
    "kadence.topics.partition_for in Python)"
)

#: every topic of a namespace, in the order the document lists them
TOPICS: tuple[TopicContract, ...] = (
    TopicContract(
        "commands",
        "{namespace}.commands",
        "Command",
        "the workflow ID (aggregate_key)",
        _BY_WORKFLOW + ". A record on another partition is dead-lettered (WrongPartitionError), not applied.",
        "delete",
        ("client", "gateway", "worker", "timers", "bridge", "archiver", "processor (a child's start)"),
        ("processor",),
        "Every input of a workflow's state machine: starts, signals, cancellations, task completions, "
        "activity results, timer firings. Written idempotently; the processor applies each in a Kafka "
        "transaction with its outputs, and answers on replies when request_id is set.",
        30 * _DAY_MS,
        public=True,
    ),
    TopicContract(
        "replies",
        "{namespace}.replies",
        "Reply",
        "the request ID of the command answered",
        "each processor instance writes to one partition (CRC-32 of its instance ID modulo the partition "
        "count); a requester reads every partition and matches the key",
        "delete",
        ("processor",),
        ("client", "gateway", "worker", "bridge"),
        "The outcome of a command that carried a request_id: ok, or refused with a reason. Read with "
        "isolation.level=read_committed.",
        _DAY_MS,
        public=True,
    ),
    TopicContract(
        "history",
        "{namespace}.history",
        "HistoryEvent",
        "{workflow_id}/{run_id}/{seq}",
        "explicitly the partition of the workflow ID on commands (same partition number), so a "
        "workflow's history is one ordered log",
        "compact",
        ("processor",),
        ("projections", "archiver", "client (history reads)", "gateway", "worker (large workflow tasks)"),
        "One record per history event of every run, written in the transaction that applied the command. "
        "Read with isolation.level=read_committed; rebuild any projection from it.",
        public=True,
    ),
    TopicContract(
        "state",
        "{namespace}.state",
        "WorkflowState",
        "the workflow ID",
        "explicitly the partition of the workflow ID on commands",
        "compact",
        ("processor",),
        ("processor (restore)", "client (describe)", "gateway"),
        "The latest state of each workflow (status, pending activities, timers and children, recent "
        "request IDs); a tombstone when a closed run is purged. Internal: its schema may change with "
        "any release.",
    ),
    TopicContract(
        "dlq",
        "{namespace}.dlq",
        "DeadLetter",
        "the key of the record it holds",
        "Kafka's default partitioner on the key",
        "delete",
        ("processor", "timers", "bridge"),
        ("operators (kadence dlq, GET /v1/dead-letters)",),
        "Records that could not be processed, with the reason and where they came from; redriven once by an operator.",
        30 * _DAY_MS,
    ),
    TopicContract(
        "builds",
        "{namespace}.builds",
        "BuildDefault",
        "the task queue",
        "Kafka's default partitioner on the key",
        "compact",
        ("operators (kadence builds promote)", "worker (--promote)"),
        ("processor",),
        "The worker build new workflows of each task queue start on.",
    ),
    TopicContract(
        "queueLimits",
        "{namespace}.queue_limits",
        "QueueLimit",
        "the task queue",
        "Kafka's default partitioner on the key",
        "compact",
        ("operators (kadence queues set-limit, PUT /v1/queues/{task_queue}/limits, the console)",),
        ("worker",),
        "Each task queue's activity rate limits (whole queue, per activity type), with who set them, "
        "when and why; workers pace their share of the queue's activity-task partitions to them.",
    ),
    TopicContract(
        "concurrency",
        "{namespace}.concurrency",
        "ConcurrencyState",
        "concurrency:{name}={value}, the limit key",
        "explicitly the partition of the limit key on commands (its owning shard)",
        "compact",
        ("processor",),
        ("processor (restore)", "operators (kadence limits)"),
        "Each concurrency limit's holders and waiting requests, first come first served, written in the "
        "transactions of the shard that owns the key. Internal: its schema may change with any release.",
    ),
    TopicContract(
        "streams",
        "{namespace}.streams",
        "StreamRecord",
        "the workflow ID",
        "Kafka's default partitioner on the key, over this topic's own partition count",
        "delete",
        ("processor",),
        ("clients (handle.stream)", "gateway (GET /v1/workflows/{workflow_id}/streams/{stream}, Server-Sent Events)"),
        "What workflow code and activity attempts publish on a workflow's streams, written in the "
        "transaction that accepted it (an activity attempt's only with its accepted result); a record "
        "with end = true ends every stream of the workflow. Read it with isolation.level=read_committed.",
    ),
    TopicContract(
        "timers",
        "{namespace}.timers.{tier}",
        "TimerRecord",
        "the workflow ID",
        _BY_WORKFLOW,
        "delete",
        ("processor", "timers"),
        ("timers",),
        "Delay tiers of the timer service (tier: 1s, 10s, 1m, 10m, 1h, 1d): a timer waits in the "
        "tier that fits it and fires as a command.",
        30 * _DAY_MS,
    ),
    TopicContract(
        "workflowTasks",
        "{namespace}.tasks.workflow.{task_queue}",
        "WorkflowTask",
        "the workflow ID",
        _BY_WORKFLOW,
        "delete",
        ("processor",),
        ("worker (group {namespace}.worker.workflow.{task_queue})",),
        "Workflow tasks of unversioned runs for the workers of a task queue.",
        7 * _DAY_MS,
    ),
    TopicContract(
        "buildTasks",
        "{namespace}.tasks.build.{task_queue}.{build_id}",
        "WorkflowTask",
        "the workflow ID",
        _BY_WORKFLOW,
        "delete",
        ("processor",),
        ("worker (group {namespace}.worker.build.{task_queue}.{build_id})",),
        "Workflow tasks of runs pinned to one worker build of a task queue.",
        7 * _DAY_MS,
    ),
    TopicContract(
        "workflowTaskLanes",
        "{namespace}.tasks.workflow-p{level}.{task_queue}",
        "WorkflowTask",
        "the workflow ID",
        _BY_WORKFLOW,
        "delete",
        ("processor",),
        ("worker (group {namespace}.worker.workflow.{task_queue}, with the default lane)",),
        "Workflow tasks of unversioned runs of one priority level (the run's) of a task queue; the workers "
        "read every lane and dispatch by weight.",
        7 * _DAY_MS,
    ),
    TopicContract(
        "buildTaskLanes",
        "{namespace}.tasks.build-p{level}.{task_queue}.{build_id}",
        "WorkflowTask",
        "the workflow ID",
        _BY_WORKFLOW,
        "delete",
        ("processor",),
        ("worker (group {namespace}.worker.build.{task_queue}.{build_id}, with the default lane)",),
        "Workflow tasks of one priority level of the runs pinned to one worker build of a task queue.",
        7 * _DAY_MS,
    ),
    TopicContract(
        "activityTasks",
        "{namespace}.tasks.activity.{task_queue}",
        "ActivityTask",
        "the workflow ID",
        _BY_WORKFLOW,
        "delete",
        ("processor",),
        ("worker (group {namespace}.worker.activity.{task_queue})",),
        "Activity attempts for the workers of a task queue; a worker reports each result as a command "
        "in a transaction with the task's offset. The lane of priority level 3 (the default); a task "
        "with a fairness key carries it in the record headers kadence-fairness-key and "
        "kadence-fairness-weight.",
        7 * _DAY_MS,
    ),
    TopicContract(
        "activityTaskLanes",
        "{namespace}.tasks.activity-p{level}.{task_queue}",
        "ActivityTask",
        "the workflow ID",
        _BY_WORKFLOW,
        "delete",
        ("processor",),
        ("worker (group {namespace}.worker.activity.{task_queue}, with the default lane)",),
        "Activity attempts of one priority level of a task queue: the workers read every lane and dispatch "
        "by weight (level 1 sixteen times level 5's share while both wait), within a lane by fairness key.",
        7 * _DAY_MS,
    ),
)

_PARAMETERS = {
    "namespace": "the Kadence namespace (KADENCE_NAMESPACE): every topic, group and transactional ID lies under it",
    "task_queue": "a task queue: 1-100 characters from A-Z a-z 0-9 . _ -",
    "build_id": "a worker build ID: 1-64 characters from A-Z a-z 0-9 _ -",
    "tier": "a timer tier: 1s, 10s, 1m, 10m, 1h or 1d",
    "level": "a priority level other than the default 3: 1, 2, 4 or 5",
}


def _channel(t: TopicContract) -> dict[str, Any]:
    params = [p for p in _PARAMETERS if "{" + p + "}" in t.address]
    config: dict[str, Any] = {"cleanup.policy": [t.cleanup]}
    if t.retention_ms is not None:
        config["retention.ms"] = t.retention_ms
    return {
        "address": t.address,
        "title": t.address,
        "description": (
            f"{t.description}\n\nKey: {t.key}. Partitioning: {t.partitioning.rstrip('.')}. Cleanup: {t.cleanup}. "
            f"Written by: {', '.join(t.writers)}. Read by: {', '.join(t.readers)}."
            + ("" if t.public else " Not a public contract: read it, do not write it.")
        ),
        "parameters": {p: {"description": _PARAMETERS[p]} for p in params},
        "messages": {t.record: {"$ref": f"#/components/messages/{t.record}"}},
        "bindings": {"kafka": {"topicConfiguration": config, "bindingVersion": "0.5.0"}},
        "x-kadence-writers": list(t.writers),
        "x-kadence-readers": list(t.readers),
        "x-kadence-public": t.public,
    }


def _message(record: str, key: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": record,
        "title": record,
        "summary": schema.get("doc", record),
        "contentType": "application/octet-stream",
        "description": (
            f"Value: the byte {MAGIC} (ASCII 'K'), one byte naming the Kadence schema version that wrote the "
            f"record (this document: version {CURRENT_VERSION}), then the record in Avro binary encoding "
            "with the schema below (older versions resolve to it by Avro's rules; kadence.topics.serde). "
            "No Kafka headers are used: trace context travels in the trace_id/span_id fields."
            + (
                " With a schema registry configured (KADENCE_SCHEMA_REGISTRY_URL), Kadence writes this record "
                "in the Confluent wire format instead: the byte 0, the 4-byte schema ID under the subject "
                "'{topic}-value', then the same Avro body; its readers read both (docs/schema-registry.md)."
                if record in PUBLIC_RECORDS
                else ""
            )
        ),
        "payload": {"schemaFormat": AVRO, "schema": schema},
        "bindings": {"kafka": {"key": {"type": "string", "description": key}, "bindingVersion": "0.5.0"}},
    }


def document() -> dict[str, Any]:
    """The AsyncAPI 3.1 document of a namespace's topics."""
    schemas = load_schema_set()
    messages: dict[str, Any] = {}
    for t in TOPICS:
        if t.record not in messages:
            messages[t.record] = _message(t.record, t.key, self_contained(t.record, schemas))
    channels = {t.channel: _channel(t) for t in TOPICS}

    def op(action: str, channel: str, summary: str) -> dict[str, Any]:
        record = next(t.record for t in TOPICS if t.channel == channel)
        return {
            "action": action,
            "channel": {"$ref": f"#/channels/{channel}"},
            "summary": summary,
            "messages": [{"$ref": f"#/channels/{channel}/messages/{record}"}],
        }

    return {
        "asyncapi": "3.1.0",
        "info": {
            "title": "Kadence topics",
            "version": str(CURRENT_VERSION),
            "description": (
                "The Kafka topics of one Kadence namespace, generated from the topic catalogue and the "
                "schema store (kadence topics asyncapi); the version is the schema set's. The operations "
                "are what a service outside Kadence does: start, signal and cancel workflows by writing "
                "commands, learn the outcome from replies, and follow histories."
            ),
        },
        "defaultContentType": "application/octet-stream",
        "servers": {
            "kafka": {
                "host": "{bootstrap}",
                "protocol": "kafka",
                "description": "the cluster's bootstrap servers (KADENCE_KAFKA_BOOTSTRAP)",
                "variables": {"bootstrap": {"default": "localhost:9092"}},
            }
        },
        "channels": channels,
        "operations": {
            "sendCommand": op(
                "send",
                "commands",
                "start, signal, cancel or terminate a workflow (idempotent producer; key and partition by "
                "workflow ID; set request_id to be answered on replies)",
            ),
            "receiveReply": op("receive", "replies", "learn a command's outcome by its request ID"),
            "receiveHistory": op("receive", "history", "follow every run's history, for projections and audits"),
        },
        "components": {"messages": messages},
    }


def render() -> str:
    """``document()`` as the YAML of ``docs/asyncapi.yaml``."""
    header = (
        "# Generated by `kadence topics asyncapi -o docs/asyncapi.yaml` from the topic catalogue and the\n"
        "# schemas; do not edit (tests/unit/test_asyncapi.py fails when it is stale).\n"
    )
    body: str = yaml.safe_dump(document(), sort_keys=False, allow_unicode=True, width=100)
    return header + body


def client_schemas() -> dict[str, str]:
    """File name -> text of the self-contained schemas a client in another language needs
    (``{record}.avsc``), and ``VERSION``: the schema-set version to put in the records' second
    byte (``docs/examples/clients/schemas``, written by ``kadence topics asyncapi --schemas DIR``)."""
    schemas = load_schema_set()
    out = {f"{r}.avsc": json.dumps(self_contained(r, schemas), indent=1) + "\n" for r in CLIENT_RECORDS}
    out["VERSION"] = f"{CURRENT_VERSION}\n"
    return out
