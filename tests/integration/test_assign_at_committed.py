"""Every engine consumer reads its committed offsets itself and assigns its partitions at them, so
librdkafka sends no committed-offset request of its own after a rebalance: one answered with a
request-level NOT_COORDINATOR is never retried (librdkafka #5586) and leaves the partitions
unfetched for good (``make soak``'s worker that ran no activity after a 30 s broker pause).

librdkafka's ``cgrp`` debug log names each query ("Querying committed offset for pending assigned
partition"); these tests read that log. The first one shows that a plain subscriber does query (so
the phrase is the right one for the librdkafka installed), the others that ours do not."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kadence import Client, Worker
from kadence.topics.broker_wait import assign_at_committed

from .conftest import wait_until
from .workflows import SleepThenAct, add

QUERY = "Querying committed offset for pending assigned partition"
START = "Starting pending assigned partition"
PER_PARTITION = 10


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def text(self) -> str:
        return "\n".join(self.lines)


def _logger() -> tuple[logging.Logger, _Lines]:
    logger = logging.getLogger(f"librdkafka-test-{uuid.uuid4().hex[:8]}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    handler = _Lines()
    logger.addHandler(handler)
    return logger, handler


def _consume_firsts(consumer: Consumer, partitions: int) -> dict[int, int]:
    """The first offset read from each partition (polls up to 60 s)."""
    first: dict[int, int] = {}
    deadline = time.monotonic() + 60
    while len(first) < partitions and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            first.setdefault(msg.partition(), msg.offset())
    return first


def test_a_subscriber_assigned_by_the_helper_starts_at_the_committed_offsets_without_a_query(kafka_bootstrap):
    topic, group = f"aac-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for p in range(2):
        for i in range(PER_PARTITION):
            producer.produce(topic, f"{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    base = {
        "bootstrap.servers": kafka_bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": 6000,
        "debug": "cgrp",
    }
    committer = Consumer({k: v for k, v in base.items() if k != "debug"})
    committer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    committer.close()

    # control: a plain subscriber leaves the read to librdkafka, which logs its query
    logger, plain_log = _logger()
    plain = Consumer({**base, "logger": logger})
    plain.subscribe([topic])
    try:
        assert _consume_firsts(plain, 2) == {0: 5, 1: 0}
    finally:
        plain.close()
    assert QUERY in plain_log.text()

    logger, ours_log = _logger()
    ours = Consumer({**base, "logger": logger})
    stop = threading.Event()
    read: list = []

    def on_assign(consumer, partitions):
        read.extend(
            assign_at_committed(
                consumer, partitions, timeout=30, what=topic, who="test", stop=stop, log=logging.getLogger(__name__)
            )
        )

    ours.subscribe([topic], on_assign=on_assign)
    try:
        assert _consume_firsts(ours, 2) == {0: 5, 1: 0}
    finally:
        ours.close()
    assert sorted((tp.partition, tp.offset) for tp in read) == [(0, 5), (1, -1001)]
    assert START in ours_log.text()
    assert QUERY not in ours_log.text(), ours_log.text()[-3000:]


async def test_the_processor_timer_service_and_worker_query_no_committed_offset(kafka_config, processors, caplog):
    debug = {"KADENCE_KAFKA_DEBUG": "cgrp"}
    processors.start(env=debug)
    processors.start_timers(env=debug)
    # the worker's librdkafka log through Python logging (the json log format's route)
    config = dataclasses.replace(kafka_config, kafka_debug="cgrp", log_format="json")
    client = await Client.connect(config=config)
    try:
        with caplog.at_level(logging.DEBUG, logger="kadence.librdkafka"):
            async with Worker(client, task_queue="q", workflows=[SleepThenAct], activities=[add]):
                handle = await client.start_workflow(SleepThenAct, 0.5, id="aac-1", task_queue="q")
                assert await handle.result(timeout=60) == 2  # a workflow task, a timer, an activity
    finally:
        await client.close()
    worker_log = "\n".join(r.getMessage() for r in caplog.records if r.name == "kadence.librdkafka")
    assert START in worker_log
    assert QUERY not in worker_log
    for pattern in ("processor-p0-*.log", "timers-t0-*.log"):
        [path] = processors.logdir.glob(pattern)
        await wait_until(lambda path=path: START in path.read_text(), 10, f"{pattern}: a partition started")
        text = path.read_text()
        assert QUERY not in text, f"{pattern} queried: {text[-3000:]}"
