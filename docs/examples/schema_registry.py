"""Kadence's public topics in the Confluent wire format, against a schema registry.

Run it with the project's dev stack (starts Kafka and a schema registry, runs this, stops them):

    python3 scripts/devstack.py run -- .venv/bin/python docs/examples/schema_registry.py

It registers the namespace's subjects (``kadence topics apply`` with KADENCE_SCHEMA_REGISTRY_URL;
the dev stack's registry when that is not set), starts a history processor configured with the
registry, runs a workflow, and reads its history from Kafka the way another team's service would:
a plain consumer with confluent-kafka's own Avro deserializer, no Kadence code, no schema files.
"""

import asyncio
import os
import subprocess
import sys
import uuid

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kadence import Client, Worker, workflow
from kadence.topics import KafkaConfig


@workflow.defn
class Hello:
    @workflow.run
    async def run(self, name: str) -> str:
        return f"Hello, {name}!"


def history_as_another_service_reads_it(config: KafkaConfig) -> list[tuple[str, int, str]]:
    """(workflow ID, seq, event type) of every history record, read to the topic's end."""
    topic = f"{config.namespace}.history"
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": config.schema_registry_url}), return_record_name=True)
    consumer = Consumer(
        {
            "bootstrap.servers": config.bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",  # the processor writes in transactions
            "enable.partition.eof": True,
        }
    )
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    events, at_end = [], set()
    while len(at_end) < len(partitions):
        for msg in consumer.consume(500, timeout=1):
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                continue
            event = deserialize(msg.value(), SerializationContext(topic, MessageField.VALUE))
            events.append((event["aggregate_key"], event["seq"], event["attributes"][0].split(".")[-1]))
    consumer.close()
    return sorted(events)


async def main() -> None:
    url = os.environ.get("KADENCE_SCHEMA_REGISTRY_URL") or os.environ["KADENCE_DEV_SCHEMA_REGISTRY_URL"]
    namespace = f"registry{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "KADENCE_NAMESPACE": namespace, "KADENCE_SCHEMA_REGISTRY_URL": url}
    # the topics, and the subjects {namespace}.commands-value, .replies-value, .history-value
    applied = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "kadence.cli", "topics", "apply"],
        env=env,
        text=True,
        capture_output=True,
    )
    assert applied.returncode == 0, applied.stderr
    print("\n".join(line for line in applied.stdout.splitlines() if line.startswith("subject")))
    config = KafkaConfig.from_env(namespace=namespace, schema_registry_url=url)
    processor = subprocess.Popen(
        [sys.executable, "-m", "kadence.cli", "--log-level", "warning", "processor", "--instance-id", "registry"],
        env=env,
    )
    try:
        client = await Client.connect(config=config)
        async with Worker(client, task_queue="hello", workflows=[Hello]):
            handle = await client.start_workflow(Hello, "registry", id="hello-registry", task_queue="hello")
            print("result:", await handle.result(timeout=60))
        await client.close()
    finally:
        processor.terminate()
        processor.wait(30)
    for workflow_id, seq, event_type in history_as_another_service_reads_it(config):
        print(f"history: {workflow_id} {seq} {event_type}")


if __name__ == "__main__":
    asyncio.run(main())
