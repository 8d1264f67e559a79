"""A client whose producer stops delivering while the broker answers replaces it and produces
its undelivered commands again; a command produced twice this way is applied once.

librdkafka can leave an idempotent producer that lived through a broker restart accepting
records and never sending them (``kadence.topics.replacing_producer``; a ``make chaos`` seed's
worker lost five minutes of commands that way). The producers below stand in for that state: the
first accepts records and drops them; the second writes them but never reports their delivery.
"""

import asyncio
import time

from confluent_kafka import Producer

from kadence import Client, Worker
from kadence.topics import EngineClient, JsonConverter
from tests.integration.invariants import check_history, histories
from tests.integration.workflows import ThreeSteps, add, double, three_steps_result


class SwallowingProducer(Producer):
    """Accepts every record and sends none (what the wedged producer did)."""

    swallowed = 0

    def produce(self, topic, value=None, key=None, on_delivery=None, **kw):
        type(self).swallowed += 1


class SilentProducer(Producer):
    """Sends every record and never reports its delivery (so the client thinks it is stuck)."""

    def produce(self, topic, value=None, key=None, on_delivery=None, **kw):
        super().produce(topic, value, key, **kw)


def _factory(first):
    made = []

    def make(conf):
        made.append((first if not made else Producer)(conf))
        return made[-1]
    return make, made


async def _client(kafka_config, factory):
    engine = await asyncio.get_running_loop().run_in_executor(
        None, lambda: EngineClient(kafka_config, producer_stall_s=2.0, producer_factory=factory))
    return Client(engine, JsonConverter())


async def test_a_producer_that_delivers_nothing_is_replaced_and_the_start_goes_through(
        kafka_config, processors, client):
    processors.start()
    factory, made = _factory(SwallowingProducer)
    wedged = await _client(kafka_config, factory)
    try:
        async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double]):
            started = time.monotonic()
            handle = await wedged.start_workflow(ThreeSteps, 4, id="wedged-1", task_queue="q", timeout=60)
            assert time.monotonic() - started >= 2.0  # the first producer swallowed the start
            assert await handle.result(timeout=60) == three_steps_result(4)
        assert SwallowingProducer.swallowed >= 1
        assert len(made) == 2 and wedged._engine._producer.replacements == 1
    finally:
        await wedged.close()


async def test_a_command_produced_again_after_a_lost_delivery_report_is_applied_once(
        kafka_config, processors, client):
    processors.start()
    factory, made = _factory(SilentProducer)
    silent = await _client(kafka_config, factory)
    try:
        async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double]):
            handle = await silent.start_workflow(ThreeSteps, 6, id="twice-1", task_queue="q", timeout=60)
            # the start was written; its delivery report never came, so it is produced again
            deadline = time.monotonic() + 30
            while silent._engine._producer.replacements == 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            assert silent._engine._producer.replacements == 1
            silent._engine.flush(10)
            assert await handle.result(timeout=60) == three_steps_result(6)
        runs = {k: v for k, v in histories(kafka_config).items() if k[0] == "twice-1"}
        assert list(runs) == [("twice-1", handle.run_id)]
        events = runs[("twice-1", handle.run_id)]
        assert [e["attributes"][0] for e in events].count("WorkflowExecutionStarted") == 1
        assert check_history(events) == []
    finally:
        await silent.close()
