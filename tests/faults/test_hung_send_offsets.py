"""A ``send_offsets_to_transaction`` that never returns (librdkafka #5511, decision 0035) is given
up after its allowance, in the processor and in the worker's activity reporter: the producer is
replaced (which fences it), the batch is done again, and every event is recorded once.

After a broker restart librdkafka 2.16 can wait in that call for ever on a group coordinator it
dropped (the bench's broker_recovery rounds sat in it for minutes). The producers below stand in
for that state: their first ``send_offsets_to_transaction`` never returns (until the test ends).
"""

from __future__ import annotations

import threading

from confluent_kafka import Producer
from prometheus_client import CollectorRegistry

from kadence import Worker, _reporter
from kadence.processors import HistoryProcessor, ProcessorConfig, history_processor
from tests.integration.conftest import wait_until
from tests.integration.invariants import check_history, histories
from tests.integration.workflows import ThreeSteps, add, double, three_steps_result


def first_send_offsets_hangs(release: threading.Event):
    class FirstSendOffsetsHangs(Producer):
        hung = 0

        def send_offsets_to_transaction(self, *args):
            if type(self).hung == 0:
                type(self).hung += 1
                release.wait()  # from Python, the librdkafka hang is a call that does not return
            return super().send_offsets_to_transaction(*args)

    return FirstSendOffsetsHangs


def assert_recorded_once(kafka_config, workflow_id: str, run_id: str) -> None:
    events = histories(kafka_config)[(workflow_id, run_id)]
    assert check_history(events) == []
    kinds = [e["attributes"][0] for e in events]
    assert kinds.count("ActivityTaskScheduled") == kinds.count("ActivityTaskCompleted") == 3
    assert kinds.count("WorkflowExecutionStarted") == kinds.count("WorkflowExecutionCompleted") == 1


async def test_the_processor_gives_up_a_hung_send_offsets_replaces_its_producer_and_records_each_event_once(
    kafka_config, client, monkeypatch
):
    release = threading.Event()
    hanging = first_send_offsets_hangs(release)
    monkeypatch.setattr(history_processor, "Producer", hanging)
    registry = CollectorRegistry()
    proc = HistoryProcessor(
        ProcessorConfig(kafka=kafka_config, instance_id="hung-p0", session_timeout_ms=6000, txn_hang_s=2.0),
        registry=registry,
    )
    runner = threading.Thread(target=proc.run, name="processor-under-test", daemon=True)
    runner.start()
    try:
        await wait_until(lambda: proc.started, 60, "the processor to start")
        async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double]):
            handle = await client.start_workflow(ThreeSteps, 5, id="hung-offsets-p", task_queue="q")
            assert await handle.result(timeout=90) == three_steps_result(5)
        assert hanging.hung == 1
        assert (
            registry.get_sample_value("kadence_processor_txn_hangs_total", {"namespace": kafka_config.namespace}) == 1
        )
        assert runner.is_alive()  # no exit: the process rode it out
        assert_recorded_once(kafka_config, "hung-offsets-p", handle.run_id)
    finally:
        proc.stop()
        runner.join(30)
        release.set()  # the abandoned call returns on a fenced producer and its helper ends
    assert not runner.is_alive()


async def test_the_reporter_gives_up_a_hung_send_offsets_and_commits_its_results_again_once(
    kafka_config, processors, client, monkeypatch
):
    release = threading.Event()
    hanging = first_send_offsets_hangs(release)
    monkeypatch.setattr(_reporter, "Producer", hanging)
    processors.start()
    try:
        # the reporter's transactions are under test: eager attempts would not go through them
        worker = Worker(
            client, task_queue="q", workflows=[ThreeSteps], activities=[add, double], eager_activities=False
        )
        async with worker:
            handle = await client.start_workflow(ThreeSteps, 9, id="hung-offsets-w", task_queue="q")
            assert await handle.result(timeout=90) == three_steps_result(9)
            assert hanging.hung == 1
            assert worker._reporter.hangs == 1 and worker._reporter.takeovers == 0
        assert_recorded_once(kafka_config, "hung-offsets-w", handle.run_id)
    finally:
        release.set()
