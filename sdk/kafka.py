"""``kadence.kafka``: a small kit for a service that starts and signals workflows with its own Kafka
producer instead of the SDK's ``Client`` (issue 48 item 3).

Kadence's commands topic is a public contract (``docs/asyncapi.yaml``): a record keyed by the
workflow ID, on the partition murmur2 of that key picks (Kafka's Java default; in librdkafka
``partitioner=murmur2_random``), valued in Kadence's wire format. This module builds those
records and reads the replies; it opens no connection of its own.

    from confluent_kafka import Producer
    from kadence import kafka

    producer = Producer(kafka.producer_config("broker:9092"))
    request_id = kafka.new_request_id()
    key, value = kafka.start_command("Order", "order-42", "orders", [{"sku": "tea"}], request_id=request_id)
    producer.produce(kafka.commands_topic("prod"), value, key)
    producer.flush()

A command that carries a ``request_id`` is answered on ``{namespace}.replies`` by a record keyed
by that ID (``decode_reply``); the request ID also makes a retried send apply once. Other
languages: ``docs/kafka-clients.md`` (Java and Go examples, run by the test suite).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from kadence.topics import serde
from kadence.topics.identifiers import check_workflow_id
from kadence.topics.partitioner import partition_for
from kadence.topics.protocol import cancel_body, signal_body, start_body
from kadence.topics.records import command, new_id

__all__ = [
    "cancel_command",
    "commands_topic",
    "decode_reply",
    "new_request_id",
    "partition_for",
    "producer_config",
    "replies_topic",
    "signal_command",
    "start_command",
]


def producer_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """A confluent-kafka producer configuration that puts a workflow's commands on its partition
    (``murmur2_random``: librdkafka's default, ``consistent_random``, puts them elsewhere and the
    engine dead-letters them) and writes each once (idempotent)."""
    return {
        "bootstrap.servers": bootstrap,
        "partitioner": "murmur2_random",
        "enable.idempotence": True,
        **extra,
    }


def commands_topic(namespace: str) -> str:
    return f"{namespace}.commands"


def replies_topic(namespace: str) -> str:
    return f"{namespace}.replies"


def new_request_id() -> str:
    """A fresh request ID: send it again with a retried command, and the command applies once."""
    return new_id()


def _args(args: Sequence[Any]) -> bytes:
    if isinstance(args, str | bytes) or not isinstance(args, Sequence):
        raise TypeError(f"args must be a list of the workflow's arguments, not {type(args).__name__}")
    return json.dumps(list(args), separators=(",", ":")).encode()


def _record(workflow_id: str, body_type: str, body: Mapping[str, Any], request_id: str | None) -> tuple[bytes, bytes]:
    check_workflow_id(workflow_id)
    return workflow_id.encode(), serde.encode("Command", command(workflow_id, body_type, body, request_id=request_id))


def start_command(
    workflow_type: str,
    workflow_id: str,
    task_queue: str,
    args: Sequence[Any] = (),
    *,
    request_id: str | None = None,
    id_reuse_policy: str = "allow_duplicate",
) -> tuple[bytes, bytes]:
    """(key, value) of a command that starts ``workflow_type`` as ``workflow_id`` on ``task_queue``
    with ``args`` (JSON values). Bad input raises the SDK's typed errors and builds nothing."""
    body = start_body(workflow_type, task_queue, _args(args), id_reuse_policy=id_reuse_policy)
    return _record(workflow_id, "StartWorkflow", body, request_id)


def signal_command(
    workflow_id: str, signal: str, args: Sequence[Any] = (), *, request_id: str | None = None, identity: str = "kafka"
) -> tuple[bytes, bytes]:
    """(key, value) of a command that signals the workflow's current run."""
    return _record(workflow_id, "SignalWorkflow", signal_body(signal, _args(args), identity=identity), request_id)


def cancel_command(workflow_id: str, reason: str = "", *, request_id: str | None = None) -> tuple[bytes, bytes]:
    """(key, value) of a command that asks the workflow's current run to cancel."""
    return _record(workflow_id, "RequestCancelWorkflow", cancel_body(reason), request_id)


def decode_reply(value: bytes) -> dict[str, Any]:
    """A reply record (its key is the request ID): ``{"request_id", "workflow_id", "run_id",
    "status", "message", ...}``; ``status`` is ``ok`` or why the command was refused."""
    reply: dict[str, Any] = serde.decode("Reply", value)
    return reply
