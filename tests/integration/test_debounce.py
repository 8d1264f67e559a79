"""Debounced starts on the real broker (issue 46 item 3, decision 0059): a burst of 100 starts of
one workflow ID gives one run, with the last input, whose code runs no earlier than the debounce
after the last start, while one of two processors is SIGKILLed mid-burst (the workflow's
partition may move); every start of the burst is answered with the same run ID."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from kadence import Worker, workflow

from .invariants import check_history, histories


@workflow.defn
class Reindex:
    @workflow.run
    async def run(self, change: int) -> str:
        return f"reindexed after change {change}"


async def test_a_burst_of_100_starts_gives_one_run_with_the_last_input(client, processors, kafka_config):
    processors.start("p0")
    processors.start("p1")
    processors.start_timers()  # the debounce is a durable timer
    handles = []
    for i in range(100):
        if i == 50:
            processors.kill("p0")  # mid-burst: its partitions move to p1
        handles.append(
            await client.start_workflow(
                Reindex, i, id="reindex-acme", task_queue="q", debounce=timedelta(seconds=3), timeout=60
            )
        )
    processors.start("p0")
    assert len({h.run_id for h in handles}) == 1, "a start of the burst got another run"
    async with Worker(client, task_queue="q", workflows=[Reindex]):
        result = await asyncio.wait_for(handles[-1].result(), 120)
    assert result == "reindexed after change 99"
    runs = {run: events for (wf, run), events in (await asyncio.to_thread(histories, kafka_config)).items()}
    (events,) = runs.values()
    assert not check_history(events), check_history(events)
    kinds = [e["attributes"][0] for e in events]
    assert kinds.count("WorkflowExecutionStarted") == 1 and kinds.count("WorkflowStartDebounced") == 99
    joined = [e for e in events if e["attributes"][0] == "WorkflowStartDebounced"]
    assert [e["attributes"][1]["input"] for e in joined][-1] == b"[99]"
    first_task = next(e for e in events if e["attributes"][0] == "WorkflowTaskScheduled")
    assert first_task["timestamp_ms"] >= joined[-1]["timestamp_ms"] + 3000
    assert first_task["seq"] > joined[-1]["seq"]  # no code ran during the burst
