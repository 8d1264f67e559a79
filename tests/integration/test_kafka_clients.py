"""Clients in any language (issue 48 item 3): a service with its own Kafka client starts a
workflow, signals it and reads its result through the commands and replies topics alone, in
Python with ``kadence.kafka`` and a plain confluent-kafka producer, and in Java and Go with the
examples of docs/examples/clients (built and run here); and a producer with the wrong partitioner
loses nothing silently: its start is refused with a reply that names the partitioner."""

from __future__ import annotations

import asyncio
import json
import shutil
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from kadence import Worker, kafka
from kadence.devstack import services as devstack
from kadence.topics.catalogue import Catalogue, TopicSpec
from kadence.topics.partitioner import partition_for
from tests.support.programs import CLIENTS, Greeter, run_program


def _replies_from_end(config) -> Consumer:
    """A consumer of every replies partition from its end (a reply is found by its key)."""
    topic = kafka.replies_topic(config.namespace)
    consumer = Consumer(config.consumer(None))
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    ends = []
    for p in partitions:
        for _ in range(100):  # a topic created a moment ago: its leaders are being elected
            try:
                ends.append(TopicPartition(topic, p, consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1]))
                break
            except KafkaException:
                time.sleep(0.2)
        else:
            raise AssertionError(f"{topic}[{p}] has no leader")
    consumer.assign(ends)
    return consumer


def _reply(consumer: Consumer, request_id: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for msg in consumer.consume(100, timeout=0.5):
            if msg.error() is None and msg.key() == request_id.encode():
                return kafka.decode_reply(msg.value())
    raise AssertionError(f"no reply to {request_id}")


async def test_a_python_service_starts_and_signals_with_its_own_producer(client, processors, kafka_config):
    processors.start()
    async with Worker(client, task_queue="greetings", workflows=[Greeter]):
        replies = await asyncio.to_thread(_replies_from_end, kafka_config)
        producer = Producer(kafka.producer_config(kafka_config.bootstrap))
        try:
            start_id = kafka.new_request_id()
            key, value = kafka.start_command("Greeter", "py-1", "greetings", ["Hello"], request_id=start_id)
            producer.produce(kafka.commands_topic(kafka_config.namespace), value, key)
            producer.produce(  # the same request again: applied once, answered alike
                kafka.commands_topic(kafka_config.namespace), value, key
            )
            producer.flush(10)
            started = await asyncio.to_thread(_reply, replies, start_id)
            assert started["status"] == "ok" and started["run_id"]
            signal_id = kafka.new_request_id()
            key, value = kafka.signal_command("py-1", "name", ["Python"], request_id=signal_id)
            producer.produce(kafka.commands_topic(kafka_config.namespace), value, key)
            producer.flush(10)
            assert (await asyncio.to_thread(_reply, replies, signal_id))["status"] == "ok"
        finally:
            replies.close()
        handle = client.get_workflow_handle("py-1")
        assert await handle.result(timeout=60) == "Hello, Python!"
        starts = [e for e in await handle.history() if e["type"] == "WorkflowExecutionStarted"]
        assert len(starts) == 1 and starts[0]["run_id"] == started["run_id"]


async def test_a_producer_with_librdkafkas_default_partitioner_is_told_not_lost(client, processors, kafka_config):
    processors.start()
    # a workflow ID that librdkafka's default partitioner (CRC32) puts on another partition
    wid = next(f"crc-{i}" for i in range(1000) if _crc_partition(f"crc-{i}") != partition_for(f"crc-{i}", 4))
    replies = await asyncio.to_thread(_replies_from_end, kafka_config)
    producer = Producer({"bootstrap.servers": kafka_config.bootstrap})  # partitioner: consistent_random
    try:
        request_id = kafka.new_request_id()
        key, value = kafka.start_command("Greeter", wid, "greetings", ["Hi"], request_id=request_id)
        producer.produce(kafka.commands_topic(kafka_config.namespace), value, key)
        producer.flush(10)
        refused = await asyncio.to_thread(_reply, replies, request_id)
    finally:
        replies.close()
    assert refused["status"] != "ok"
    assert "murmur2_random" in refused["message"] and f"partition {partition_for(wid, 4)}" in refused["message"]


def _crc_partition(key: str) -> int:
    import zlib

    return zlib.crc32(key.encode()) % 4


async def _greeter_worker_and(client, processors, coro):
    processors.start()
    async with Worker(client, task_queue="greetings", workflows=[Greeter]):
        return await coro


async def test_a_java_service_starts_signals_and_reads_the_result(client, processors, kafka_config, tmp_path):
    devstack.ensure_tools(["javac", "java"])
    lib = await asyncio.to_thread(devstack.resolve_client_jars)
    classpath = f"{tmp_path}:{lib}/*"
    await run_program("javac", "-cp", f"{lib}/*", "-d", str(tmp_path), str(CLIENTS / "java" / "KadenceClient.java"))
    out = await _greeter_worker_and(
        client,
        processors,
        run_program(
            "java",
            "-cp",
            classpath,
            "KadenceClient",
            kafka_config.bootstrap,
            kafka_config.namespace,
            "java-1",
            str(CLIENTS / "schemas"),
        ),
    )
    lines = [line for line in out.splitlines() if ": " in line]
    assert lines[0].startswith("start: ok run "), out
    assert lines[1] == "signal: ok", out
    assert json.loads(lines[2].split(": ", 1)[1]) == "Hello, Java!", out
    assert await client.get_workflow_handle("java-1").result(timeout=10) == "Hello, Java!"


async def test_a_go_service_starts_signals_and_reads_the_result(client, processors, kafka_config, tmp_path):
    devstack.ensure_tools(["go"])
    go = shutil.which("go")
    binary = tmp_path / "goclient"
    await run_program(go, "build", "-o", str(binary), ".", cwd=CLIENTS / "go")
    out = await _greeter_worker_and(
        client,
        processors,
        run_program(str(binary), kafka_config.bootstrap, kafka_config.namespace, "go-1", str(CLIENTS / "schemas")),
    )
    lines = [line for line in out.splitlines() if ": " in line]
    assert lines[0].startswith("start: ok run "), out
    assert lines[1] == "signal: ok", out
    assert json.loads(lines[2].split(": ", 1)[1]) == "Hi, Go!", out
    assert await client.get_workflow_handle("go-1").result(timeout=10) == "Hi, Go!"


async def test_kadences_murmur2_agrees_with_librdkafkas_murmur2_random(kafka_config):
    """confluent-kafka exposes librdkafka's murmur2 only as a producer setting, not as a function
    that names a key's partition, so ``kadence.topics.partition_for`` keeps its own (the processor
    checks each command's partition with it): it must agree with librdkafka for every key."""
    topic = f"{kafka_config.namespace}.partitioning"
    await asyncio.to_thread(Catalogue(kafka_config).apply, [TopicSpec(topic, 7, {})])
    keys = [f"key-{i}-é{'x' * (i % 7)}" for i in range(500)]
    landed: dict[str, int] = {}
    producer = Producer(kafka.producer_config(kafka_config.bootstrap))
    for key in keys:
        producer.produce(
            topic,
            b"",
            key.encode(),
            on_delivery=lambda err, msg: landed.__setitem__(msg.key().decode(), msg.partition()),
        )
    assert await asyncio.to_thread(producer.flush, 30) == 0
    assert len(landed) == len(keys) and len(set(landed.values())) == 7
    assert {k: partition_for(k, 7) for k in keys} == landed
