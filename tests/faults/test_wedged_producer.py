"""A client whose producer stops delivering while the broker answers replaces it and produces
its undelivered commands again; a command produced twice this way is applied once.

librdkafka can leave an idempotent producer that lived through a broker restart accepting
records and never sending them (``kadence.topics.replacing_producer``; a ``make chaos`` seed's
worker lost five minutes of commands that way). The producers below stand in for that state: the
first accepts records and drops them; the second writes them but never reports their delivery.
"""

import asyncio
import time

import pytest
from confluent_kafka import Producer

from kadence import BrokerUnavailableError, Client, NoReplyError, Worker
from kadence.topics import Catalogue, EngineClient, JsonConverter
from tests.integration.invariants import check_history, histories, read_topic
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


async def _client(kafka_config, factory, **engine_kw):
    engine_kw.setdefault("producer_stall_s", 2.0)
    engine = await asyncio.get_running_loop().run_in_executor(
        None, lambda: EngineClient(kafka_config, producer_factory=factory, **engine_kw)
    )
    return Client(engine, JsonConverter())


async def test_a_producer_that_delivers_nothing_is_replaced_and_the_start_goes_through(
    kafka_config, processors, client
):
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


async def test_a_command_produced_again_after_a_lost_delivery_report_is_applied_once(kafka_config, processors, client):
    processors.start()
    factory, _made = _factory(SilentProducer)
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


class LyingProducer(Producer):
    """Reports its first command delivered and never writes it: the shape a soak and a
    reproduction on a fresh broker showed (the first commands for one partition were never in
    the log, no delivery failed, later commands were)."""

    lied = 0

    def produce(self, topic, value=None, key=None, on_delivery=None, **kw):
        if type(self).lied == 0:
            type(self).lied += 1
            if on_delivery is not None:
                on_delivery(None, None)
            return
        super().produce(topic, value, key, on_delivery=on_delivery, **kw)


async def test_a_command_lost_without_an_error_is_produced_again_and_applied_once(kafka_config, processors):
    processors.start()
    LyingProducer.lied = 0
    lying = await _client(kafka_config, LyingProducer, resend_after_s=1.0)
    engine = lying._engine
    try:
        started = time.monotonic()
        handle = await lying.start_workflow(ThreeSteps, 6, id="lost-1", task_queue="q", timeout=60)
        assert time.monotonic() - started >= 1.0 and LyingProducer.lied == 1  # answered after the resend
        assert engine._sent == {}  # nothing kept once answered
    finally:
        await lying.close()
    runs = {k: v for k, v in histories(kafka_config).items() if k[0] == "lost-1"}
    assert list(runs) == [("lost-1", handle.run_id)]
    assert [e["attributes"][0] for e in runs[("lost-1", handle.run_id)]].count("WorkflowExecutionStarted") == 1


async def test_without_the_resend_the_lost_command_is_never_answered(kafka_config, processors):
    """The control: the same lie with resending off leaves the start unanswered."""
    processors.start()
    LyingProducer.lied = 0
    lying = await _client(kafka_config, LyingProducer, resend_after_s=0)
    try:
        # the producer reported the command delivered: to the client, the engine did not answer
        with pytest.raises(NoReplyError, match="no reply to StartWorkflow"):
            await lying.start_workflow(ThreeSteps, 6, id="lost-2", task_queue="q", timeout=4)
    finally:
        await lying.close()


async def test_a_slow_answer_gets_copies_of_the_command_and_they_are_applied_once(kafka_config, processors):
    """Resent while no processor runs yet: every copy reaches the log, one start is applied, and
    each copy after the first is answered as a duplicate (not started again)."""
    impatient = await _client(kafka_config, Producer, resend_after_s=0.5, producer_stall_s=30.0)
    try:
        start = asyncio.create_task(impatient.start_workflow(ThreeSteps, 6, id="slow-1", task_queue="q", timeout=90))
        await asyncio.sleep(2.0)  # the processor starts late on purpose: the start is sent 2-3 times meanwhile
        processors.start()
        handle = await start
    finally:
        await impatient.close()
    commands = [
        m
        for m in read_topic(kafka_config, Catalogue(kafka_config).commands, "Command")
        if m[1]["aggregate_key"] == "slow-1"
    ]
    assert len(commands) >= 3 and len({c[1]["event_id"] for c in commands}) == 1  # copies, byte for byte
    runs = {k: v for k, v in histories(kafka_config).items() if k[0] == "slow-1"}
    assert list(runs) == [("slow-1", handle.run_id)]
    assert [e["attributes"][0] for e in runs[("slow-1", handle.run_id)]].count("WorkflowExecutionStarted") == 1


async def test_a_command_kafka_never_acknowledged_is_the_brokers_failure_not_the_engines(kafka_config, processors):
    """No delivery report for the command: the wait ends with ``BrokerUnavailableError`` saying
    Kafka did not acknowledge it, not ``NoReplyError`` (which would blame a stopped engine)."""
    processors.start()
    SwallowingProducer.swallowed = 0
    swallowing = await _client(kafka_config, SwallowingProducer, resend_after_s=0, producer_stall_s=60.0)
    try:
        with pytest.raises(BrokerUnavailableError, match="Kafka did not acknowledge the command") as raised:
            await swallowing.start_workflow(ThreeSteps, 1, id="unacked-1", task_queue="q", timeout=3)
        assert not isinstance(raised.value, NoReplyError)
        assert SwallowingProducer.swallowed == 1
    finally:
        await swallowing.close()
