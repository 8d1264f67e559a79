"""The Confluent wire format against a real schema registry (issue 48 item 1, decision 0056): the
dev stack's Apicurio Registry (``KADENCE_DEV_SCHEMA_REGISTRY_URL``), the broker, processors
configured with ``KADENCE_SCHEMA_REGISTRY_URL``.

- ``kadence topics apply`` registers the public topics' subjects, every schema version, with
  BACKWARD_TRANSITIVE, and again without change; an incompatible schema is refused.
- A Java service with Apicurio's own serializer starts, signals and awaits a workflow; a Python
  consumer with confluent-kafka's ``AvroDeserializer`` reads the history topic.
- A rolling upgrade: one topic holds both formats, and everything reads both.
- A registry that is down, or lacks the subjects, stops a client at connect with a typed error.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import os
import time

import fastavro
import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, KafkaError, TopicPartition

from kadence import Client, Worker
from kadence.cli.main import main as cli
from kadence.devstack import registry as devregistry
from kadence.devstack import services as devstack
from kadence.topics import serde
from kadence.topics.catalogue import Catalogue
from kadence.topics.errors import (
    IncompatibleSchemaError,
    SchemaError,
    SchemaNotRegisteredError,
    SchemaRegistryUnavailableError,
)
from kadence.topics.schema_registry import COMPATIBILITY, register_topics, registry, schema_text, subject_of
from tests.support.programs import CLIENTS, Greeter, run_program

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def registry_url() -> str:
    url = os.environ.get("KADENCE_DEV_SCHEMA_REGISTRY_URL", "")
    assert url, "no schema registry: run the tests under scripts/devstack.py run (make test)"
    assert devregistry.registry_ready(url), f"the schema registry at {url} does not answer"
    return url


@pytest.fixture
def registered(kafka_config, registry_url):
    """The test's namespace with the registry configured and its subjects registered."""
    config = dataclasses.replace(kafka_config, schema_registry_url=registry_url)
    register_topics(Catalogue(config), registry_url)
    return config


def _subject_versions(url: str, subject: str) -> list[int]:
    import urllib.request

    with urllib.request.urlopen(f"{url}/subjects/{subject}/versions", timeout=10) as resp:
        return json.loads(resp.read())


def test_topics_apply_registers_each_public_subject_with_every_version(kafka_config, registry_url):
    env = {
        "KADENCE_KAFKA_BOOTSTRAP": kafka_config.bootstrap,
        "KADENCE_NAMESPACE": kafka_config.namespace,
        "KADENCE_PARTITIONS": str(kafka_config.partitions),
        "KADENCE_SCHEMA_REGISTRY_URL": registry_url,
    }
    first = CliRunner().invoke(cli, ["topics", "apply"], env=env)
    assert first.exit_code == 0, first.output
    lines = [line.split() for line in first.output.splitlines() if line.startswith("subject")]
    ns = kafka_config.namespace
    assert [line[1] for line in lines] == [f"{ns}.commands-value", f"{ns}.replies-value", f"{ns}.history-value"]
    assert all(line[2] == f"{COMPATIBILITY}," for line in lines), first.output
    found = registry(registry_url)
    for topic in ("commands", "replies", "history"):
        assert found.compatibility(f"{ns}.{topic}") == COMPATIBILITY
    # every version of Command in the schema store is a version of the subject, in order
    versions = _subject_versions(registry_url, f"{ns}.commands-value")
    ids = [int(x.strip(",")) for x in lines[0][5:]]
    assert len(versions) == len(ids) > 1, (versions, first.output)
    # the current version's ID is the one a writer finds
    assert found.schema_id(f"{ns}.commands", "Command") == ids[-1]
    again = CliRunner().invoke(cli, ["topics", "apply"], env=env)
    assert again.exit_code == 0, again.output
    assert [line for line in again.output.splitlines() if line.startswith("subject")] == [
        line for line in first.output.splitlines() if line.startswith("subject")
    ]
    assert _subject_versions(registry_url, f"{ns}.commands-value") == versions


def test_an_incompatible_schema_is_refused_by_the_registry(registered, registry_url):
    topic = f"{registered.namespace}.replies"
    schema = json.loads(schema_text("Reply"))
    status = next(f for f in schema["fields"] if f["name"] == "status")
    status["type"] = "long"  # a string field made a number: old records no longer read
    found = registry(registry_url)
    before = _subject_versions(registry_url, subject_of(topic))
    with pytest.raises(IncompatibleSchemaError, match="incompatible"):
        found.register_schema(topic, json.dumps(schema), "a changed Reply")
    assert _subject_versions(registry_url, subject_of(topic)) == before


def test_records_of_an_older_schema_id_read_as_todays_schema(registered, registry_url):
    """A record written by a service that still uses the subject's first version resolves into
    today's Command (fields added since take their defaults)."""
    found = registry(registry_url)
    topic = f"{registered.namespace}.commands"
    old_id = found.schema_id(topic, "Command", 1)
    new_id = found.schema_id(topic, "Command")
    assert old_id != new_id
    old_schema = fastavro.parse_schema(json.loads(schema_text("Command", 1)))
    record = {
        "event_id": "e-1",
        "aggregate_key": "wf-old",
        "timestamp_ms": 1,
        "trace_id": None,
        "request_id": "r-1",
        "idempotency_key": "r-1",
        "expected_version": None,
        "run_id": None,
        "body": ("kadence.AwaitWorkflowResult", {"wait": False}),
    }
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, old_schema, record)
    raw = b"\0" + old_id.to_bytes(4, "big") + buf.getvalue()
    codec = serde.topic_codec("Command", topic, registry_url)
    decoded = codec.decode(raw)
    assert decoded["aggregate_key"] == "wf-old"
    assert decoded["body"] == ("AwaitWorkflowResult", {"wait": False})
    assert decoded["span_id"] is None  # a field v1 did not have: its default
    with pytest.raises(SchemaError, match="schema ID 999999"):
        codec.decode(b"\0" + (999999).to_bytes(4, "big") + buf.getvalue())


async def test_a_java_service_with_the_registrys_serializer_and_a_python_reader_of_history(
    registered, registry_url, processors, tmp_path
):
    devstack.ensure_tools(["javac", "java"])
    lib = await asyncio.to_thread(devregistry.resolve_registry_client_jars)
    await run_program("javac", "-cp", f"{lib}/*", "-d", str(tmp_path), str(CLIENTS / "java" / "RegistryClient.java"))
    processors.start(env={"KADENCE_SCHEMA_REGISTRY_URL": registry_url})
    root = registry_url.split("/apis/")[0]
    client = await Client.connect(config=registered)
    try:
        async with Worker(client, task_queue="greetings", workflows=[Greeter]):
            out = await run_program(
                "java",
                "-cp",
                f"{tmp_path}:{lib}/*",
                "RegistryClient",
                registered.bootstrap,
                registered.namespace,
                "java-registry-1",
                root,
            )
        lines = [line for line in out.splitlines() if ": " in line]
        assert lines[0].startswith("start: ok run "), out
        assert lines[1] == "signal: ok", out
        assert json.loads(lines[2].split(": ", 1)[1]) == "Hello, Registry!", out
        assert await client.get_workflow_handle("java-registry-1").result(timeout=10) == "Hello, Registry!"
    finally:
        await client.close()
    events = _history_with_the_registrys_deserializer(registered, registry_url, "java-registry-1")
    names = [name for name, _ in events]
    assert names[0] == "kadence.WorkflowExecutionStarted", names
    assert names[-1] == "kadence.WorkflowExecutionCompleted", names
    assert "kadence.WorkflowSignaled" in names, names


def _history_with_the_registrys_deserializer(config, url, workflow_id):
    """(event type, attributes) of a workflow, read from the history topic by a plain consumer
    with confluent-kafka's own Avro deserializer; every record must be in the registry's format."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = f"{config.namespace}.history"
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": url}), return_record_name=True)
    found = []
    for msg in _history_records(config):
        assert msg.value()[:1] == b"\0", "a history record not in the registry's format"
        event = deserialize(msg.value(), SerializationContext(topic, MessageField.VALUE))
        if event["aggregate_key"] == workflow_id:
            found.append((event["seq"], event["attributes"]))
    return [attrs for _, attrs in sorted(found, key=lambda x: x[0])]


async def test_a_rolling_upgrade_leaves_both_formats_on_one_topic_and_everything_reads_both(
    kafka_config, registered, registry_url, processors
):
    # before: processors and clients in Kadence's format
    processors.start("p0")
    plain = await Client.connect(config=kafka_config)
    try:
        async with Worker(plain, task_queue="greetings", workflows=[Greeter]):
            handle = await plain.start_workflow(Greeter.run, "Hi", id="upgrade-1", task_queue="greetings")
            await plain.get_workflow_handle("upgrade-1").describe()
        processors.stop("p0")
        # after: the processors restarted with the registry; a client in each format
        processors.start("p1", env={"KADENCE_SCHEMA_REGISTRY_URL": registry_url})
        upgraded = await Client.connect(config=registered)
        try:
            async with Worker(upgraded, task_queue="greetings", workflows=[Greeter]):
                await plain.get_workflow_handle("upgrade-1").signal("name", "both")  # Kadence's format
                assert await upgraded.get_workflow_handle("upgrade-1").result(timeout=60) == "Hi, both!"
                second = await upgraded.start_workflow(Greeter.run, "Yo", id="upgrade-2", task_queue="greetings")
                await upgraded.get_workflow_handle("upgrade-2").signal("name", "new")
                assert await second.result(timeout=60) == "Yo, new!"
            history = [e["attributes"][0] for e in await upgraded.get_workflow_handle("upgrade-1").history(raw=True)]
        finally:
            await upgraded.close()
        assert history[0] == "WorkflowExecutionStarted", history
        assert history[-1] == "WorkflowExecutionCompleted", history
        assert handle.run_id
    finally:
        await plain.close()
    formats = _formats_of(kafka_config, "upgrade-1")
    assert formats[0] == b"K" and formats[-1] == b"\0" and set(formats) == {b"K", b"\0"}, formats
    assert set(_formats_of(kafka_config, "upgrade-2")) == {b"\0"}


def _history_records(config) -> list:
    """Every committed record of the namespace's history topic, read to its end."""
    topic = f"{config.namespace}.history"
    consumer = Consumer(config.consumer(None, **{"isolation.level": "read_committed", "enable.partition.eof": True}))
    try:
        parts = [TopicPartition(topic, p, 0) for p in consumer.list_topics(topic, timeout=10).topics[topic].partitions]
        consumer.assign(parts)
        out, at_end, deadline = [], set(), time.monotonic() + 30
        while len(at_end) < len(parts) and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.5):
                if msg.error() is None:
                    out.append(msg)
                elif msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
        assert len(at_end) == len(parts), "the history topic was not read to its end"
        return out
    finally:
        consumer.close()


def _formats_of(config, workflow_id) -> list[bytes]:
    """The first byte of each history record of a workflow, in history order."""
    found = []
    for msg in _history_records(config):
        key = msg.key().decode()
        if key.startswith(f"{workflow_id}/"):
            found.append((int(key.rsplit("/", 1)[1]), msg.value()[:1]))
    return [fmt for _, fmt in sorted(found)]


async def test_a_registry_that_is_down_or_lacks_the_subjects_stops_a_client_at_connect(kafka_config, registry_url):
    down = dataclasses.replace(kafka_config, schema_registry_url="http://127.0.0.1:9/apis/ccompat/v6")
    started = time.monotonic()
    with pytest.raises(SchemaRegistryUnavailableError, match="did not answer"):
        await Client.connect(config=down)
    assert time.monotonic() - started < 30
    unregistered = dataclasses.replace(kafka_config, schema_registry_url=registry_url)
    with pytest.raises(SchemaNotRegisteredError, match="kadence topics apply"):
        await Client.connect(config=unregistered)
