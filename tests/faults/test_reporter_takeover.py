"""A worker whose activity-results transaction blocks for good (librdkafka #5511) replaces the
producer and commits the results again; every activity of the workflow is recorded once.

A ``make chaos`` seed's worker sat in ``commit_transaction(30)`` for minutes after a broker
restart, its activity slots full; the activities of its partitions timed out attempt after
attempt. The producer below stands in for that state: its first commit never returns.
"""

import threading

from confluent_kafka import Producer

from kadence import Worker, _reporter
from tests.integration.invariants import check_history, histories
from tests.integration.workflows import ThreeSteps, add, double, three_steps_result

RELEASE = threading.Event()


class FirstCommitHangs(Producer):
    hung = 0

    def commit_transaction(self, *args):
        if type(self).hung == 0:
            type(self).hung += 1
            RELEASE.wait()  # what the librdkafka hang looks like from Python: the call never returns
        return super().commit_transaction(*args)


async def test_a_blocked_results_transaction_is_taken_over_and_each_activity_recorded_once(
    kafka_config, processors, client, monkeypatch
):
    monkeypatch.setattr(_reporter, "Producer", FirstCommitHangs)
    processors.start()
    try:
        # the reporter's transactions are under test: eager attempts would not go through them
        worker = Worker(
            client,
            task_queue="q",
            workflows=[ThreeSteps],
            activities=[add, double],
            txn_stall_s=3.0,
            eager_activities=False,
        )
        async with worker:
            handle = await client.start_workflow(ThreeSteps, 7, id="takeover-1", task_queue="q")
            assert await handle.result(timeout=90) == three_steps_result(7)
            assert FirstCommitHangs.hung == 1 and worker._reporter.takeovers == 1
        events = histories(kafka_config)[("takeover-1", handle.run_id)]
        assert check_history(events) == []
        completed = [e for e in events if e["attributes"][0] == "ActivityTaskCompleted"]
        scheduled = [e for e in events if e["attributes"][0] == "ActivityTaskScheduled"]
        assert len(completed) == len(scheduled) == 3
    finally:
        RELEASE.set()  # the abandoned thread's call returns (fenced) and the thread ends
