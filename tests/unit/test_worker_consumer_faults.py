"""A worker's task consumer and a broker restart (chaos seed 3284925459): the committed-offset read
of an assignment is retried while the broker answers NOT_COORDINATOR (it came out of ``poll()``
and ended the consumer thread, leaving a live worker that ran no more activities), and a consumer
thread that ends on an error stops the worker with ``WorkerCrashedError``."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kadence import KafkaConfig, Worker, WorkerCrashedError, activity
from kadence._reporter import decode_reported
from kadence._task_consumer import TaskConsumer as _TaskConsumer

TOPIC = "n.tasks.activity.q"


@activity.defn
async def noop() -> None:
    return None


def _worker() -> Worker:
    client = SimpleNamespace(
        engine=None, config=KafkaConfig(bootstrap="127.0.0.1:1", namespace="n"), interceptors=(), converter=None
    )
    return Worker(client, task_queue="q", activities=[noop])


class _Restarting:
    """A consumer whose committed-offset reads fail like a restarting broker's, then answer."""

    def __init__(self, failures: int):
        self.failures, self.calls = failures, 0
        self.resumed: list[int] = []
        self.assigned: list[tuple[int, int]] = []

    def resume(self, partitions):  # an assignment takes the consumer's state: not paused here
        self.resumed += [tp.partition for tp in partitions]

    def committed(self, partitions, timeout):
        self.calls += 1
        if self.calls <= self.failures:
            raise KafkaException(
                KafkaError(KafkaError.NOT_COORDINATOR, "Failed to get committed offsets: Broker: Not coordinator")
            )
        return [TopicPartition(TOPIC, tp.partition, 5) for tp in partitions]

    def incremental_assign(self, partitions):
        self.assigned += [(tp.partition, tp.offset) for tp in partitions]


def test_an_assignment_waits_for_the_committed_offsets_while_the_broker_restarts():
    async def scenario():
        tc = _TaskConsumer(_worker(), TOPIC, "g", lambda msg: None, 10, transactional=True)
        try:
            restarting = _Restarting(failures=2)
            tc._on_assign(restarting, [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)])
            assert restarting.calls == 3
            assert restarting.resumed == [0, 1]
            assert restarting.assigned == [(0, 5), (1, 5)]  # at the offsets read, after the retries
            assert tc._reported == {(TOPIC, 0): decode_reported(5, None), (TOPIC, 1): decode_reported(5, None)}
        finally:
            tc.consumer.close()

    asyncio.run(scenario())


def test_a_stopping_consumer_gives_up_the_read():
    async def scenario():
        tc = _TaskConsumer(_worker(), TOPIC, "g", lambda msg: None, 10, transactional=True)
        try:
            tc._stop.set()
            restarting = _Restarting(failures=100)
            tc._on_assign(restarting, [TopicPartition(TOPIC, 0)])  # returns instead of waiting
            assert restarting.calls == 1 and tc._reported == {} and restarting.assigned == []
        finally:
            tc.consumer.close()

    asyncio.run(scenario())


class _Dying:
    def assignment(self):
        return []

    def poll(self, timeout):
        raise KafkaException(KafkaError(KafkaError._FATAL, "the consumer is dead"))

    def close(self):
        pass


def test_a_consumer_thread_that_dies_stops_the_worker_with_a_typed_error():
    async def scenario():
        worker = _worker()
        worker._stopped = asyncio.Event()
        tc = _TaskConsumer(worker, TOPIC, "g", lambda msg: None, 10)
        real, tc.consumer = tc.consumer, _Dying()
        try:
            await asyncio.get_running_loop().run_in_executor(None, tc._run)
            await asyncio.wait_for(worker._stopped.wait(), 5)
        finally:
            real.close()
        assert isinstance(worker._died, WorkerCrashedError) and "the consumer is dead" in str(worker._died)

    asyncio.run(scenario())
