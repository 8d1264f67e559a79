"""A record the processor cannot decode goes to the dead-letter topic; the shard keeps moving."""

from confluent_kafka import Producer

from kadence import Worker
from kadence.topics import Catalogue, partition_for
from tests.integration.invariants import read_topic
from tests.integration.workflows import ThreeSteps, add, double, three_steps_result


async def test_poison_command_is_dead_lettered_and_the_partition_keeps_moving(client, processors, kafka_config):
    topics = Catalogue(kafka_config)
    producer = Producer(kafka_config.producer())
    producer.produce(topics.commands, b"\x00not avro at all", b"poison-1")
    producer.produce(topics.commands, b"K\x01\xff\xff", b"poison-1")  # right magic, garbage body
    producer.flush(10)
    # a healthy workflow on the same shard, started after the poison records
    healthy = next(
        f"ok-{i}"
        for i in range(1000)
        if partition_for(f"ok-{i}", kafka_config.partitions) == partition_for("poison-1", kafka_config.partitions)
    )
    processors.start()
    async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double]):
        handle = await client.start_workflow(ThreeSteps, 4, id=healthy, task_queue="q")
        assert await handle.result(timeout=60) == three_steps_result(4)
    dead = [v for _k, v, _p, _o in read_topic(kafka_config, topics.dlq, "DeadLetter")]
    assert len(dead) == 2
    assert {d["origin_topic"] for d in dead} == {topics.commands}
    assert all(d["reason"].startswith("undecodable command") and d["key"] == b"poison-1" for d in dead)
    assert dead[0]["value"] == b"\x00not avro at all"
