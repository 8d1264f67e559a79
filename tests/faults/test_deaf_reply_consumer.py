"""A client whose reply consumer stops fetching replaces it at the same positions.

librdkafka can leave an assigned consumer that lived through a broker restart polling and never
fetching again (librdkafka #5153). In a ``make chaos`` seed the load driver's client got no reply
after a broker restart while every reply was on the topic. The consumer below stands in for that
state: it polls and never delivers a record, while the broker answers everything else.
"""

import asyncio
import time

import pytest
from confluent_kafka import Consumer

from kadence import Client, NoReplyError, Worker
from kadence.topics import EngineClient, JsonConverter
from tests.integration.workflows import ThreeSteps, add, double, three_steps_result


class DeafConsumer(Consumer):
    """Assigned and polling, and never delivers a record (what the wedged consumer did)."""

    def poll(self, timeout=None):
        time.sleep(min(timeout or 0, 0.2))
        return None

    def consume(self, num_messages=1, timeout=None):
        time.sleep(min(timeout or 0, 0.2))
        return []


def _factory(first):
    made = []

    def make(conf):
        made.append((first if not made else Consumer)(conf))
        return made[-1]

    return make, made


async def _engine(kafka_config, **kw):
    return await asyncio.get_running_loop().run_in_executor(None, lambda: EngineClient(kafka_config, **kw))


async def test_a_reply_consumer_that_stopped_fetching_is_replaced_and_the_start_is_answered(
    kafka_config, processors, client
):
    processors.start()
    factory, made = _factory(DeafConsumer)
    engine = await _engine(kafka_config, replies_stall_s=2.0, consumer_factory=factory)
    deaf = Client(engine, JsonConverter())
    try:
        async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double]):
            started = time.monotonic()
            handle = await deaf.start_workflow(ThreeSteps, 4, id="deaf-1", task_queue="q", timeout=60)
            assert time.monotonic() - started >= 2.0  # the reply sat on the topic until the replacement
            assert len(made) == 2 and engine.reply_consumer_replacements == 1
            assert await handle.result(timeout=60) == three_steps_result(4)
        assert engine.reply_consumer_replacements == 1
    finally:
        await deaf.close()


async def test_a_quiet_wait_does_not_replace_the_reply_consumer(kafka_config, processors):
    """Nothing past the consumer's position (no worker runs, the run stays open): a long wait
    for a result is normal and replaces nothing."""
    processors.start()
    engine = await _engine(kafka_config, replies_stall_s=1.0)
    quiet = Client(engine, JsonConverter())
    try:
        handle = await quiet.start_workflow(ThreeSteps, 4, id="quiet-1", task_queue="nobody", timeout=60)
        with pytest.raises(NoReplyError, match="the run is still open"):
            await handle.result(timeout=5)
        assert engine.reply_consumer_replacements == 0
    finally:
        await quiet.close()


async def test_without_the_watch_the_deaf_consumer_never_answers(kafka_config, processors):
    """The control: the same consumer with the watch off leaves the start unanswered."""
    processors.start()
    factory, made = _factory(DeafConsumer)
    engine = await _engine(kafka_config, replies_stall_s=0, consumer_factory=factory)
    deaf = Client(engine, JsonConverter())
    try:
        # Kafka took the command; the answer never reached this client
        with pytest.raises(NoReplyError, match="no reply to StartWorkflow"):
            await deaf.start_workflow(ThreeSteps, 4, id="deaf-2", task_queue="q", timeout=4)
        assert len(made) == 1
    finally:
        await deaf.close()
