"""Cron workflows on the broker (issue 44 item 7): a chain of runs, each run's code starting at
its own time of the schedule (a durable timer of the timer service), with the same input, through
a SIGKILL of the processor and of the timer service in the middle of the chain: no time runs twice
and every run's history is whole."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from kadence import Worker, WorkflowTerminatedError, activity, workflow

QUEUE = "cron-broker"
SEEN: list[tuple[str, str]] = []


@activity.defn
async def note(name: str) -> str:
    info = activity.info()
    SEEN.append((info.run_id, name))
    return name


@workflow.defn
class Noted:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(note, name, start_to_close_timeout=timedelta(seconds=30))


async def _runs(client, workflow_id: str, first_run: str) -> list[list[dict]]:
    """The histories of the chain's runs, first to latest."""
    out, run_id = [], first_run
    while run_id:
        events = await client.get_workflow_handle(workflow_id, run_id=run_id).history()
        out.append(events)
        run_id = events[-1]["attributes"].get("new_run_id") if len(events) > 1 else None
    return out


async def test_a_cron_chain_keeps_its_times_through_a_processor_and_timer_crash(client, processors):
    SEEN.clear()
    processors.start()
    processors.start_timers()
    async with Worker(client, task_queue=QUEUE, workflows=[Noted], activities=[note]):
        handle = await client.start_workflow(Noted, "tick", id="cron-b1", task_queue=QUEUE, cron_schedule="@every 2s")
        async with asyncio.timeout(60):
            while len(SEEN) < 2:
                await asyncio.sleep(0.1)
        processors.kill()
        processors.kill_timers()
        processors.start()
        processors.start_timers()
        async with asyncio.timeout(90):
            while len(SEEN) < 4:
                await asyncio.sleep(0.1)
        await client.get_workflow_handle("cron-b1").terminate(reason="enough")
        try:
            await handle.result(timeout=30)
            raise AssertionError("a terminated chain has no result")
        except WorkflowTerminatedError:
            pass
    runs = await _runs(client, "cron-b1", handle.run_id)
    closed = [r for r in runs if r[-1]["type"] in ("WorkflowExecutionCompleted", "WorkflowExecutionFailed")]
    assert len(closed) >= 3
    times = []
    for events in closed:
        started = events[0]["attributes"]
        assert started["cron_schedule"] == "@every 2s"
        due = started["first_task_at_ms"]
        assert due % 2000 == 0
        first_task = next(e for e in events if e["type"] == "WorkflowTaskScheduled")
        ran_ms = datetime.fromisoformat(first_task["time"]).timestamp() * 1000
        assert ran_ms >= due  # the code ran at its time, not before
        assert events[-1]["type"] == "WorkflowExecutionCompleted"
        times.append(due)
    assert times == sorted(set(times))  # each time once, in order
    # each run ran its activity once, with the chain's input (a retried attempt would show twice)
    ran = [run for run, _ in SEEN]
    assert len(ran) == len(set(ran)) and {name for _, name in SEEN} == {"tick"}
