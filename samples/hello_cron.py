"""Hello, cron (Temporal: ``hello_cron``): ``cron_schedule=`` on a start makes a cron workflow.
Its first run's code runs at the schedule's next time; each run that completes (or fails, or
times out) closes into a new run with the same arguments, at the time after; a terminate ends
the chain. Each time is a durable timer: no time is lost or run twice across restarts.
Schedules: five cron fields (``"0 9 * * MON-FRI"``), ``@hourly``/``@daily``/..., ``@every 30s``,
optionally prefixed ``CRON_TZ=Europe/Paris``."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from kadence import Client, Worker, activity, workflow

TASK_QUEUE = "hello-cron"
TICKS: list[str] = []  # what the activity saw, in this process
THIRD = asyncio.Event()


@activity.defn
async def report(name: str) -> str:
    TICKS.append(name)
    if len(TICKS) == 3:
        THIRD.set()
    return f"report {len(TICKS)}"


@workflow.defn
class Reporter:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(report, name, start_to_close_timeout=timedelta(seconds=10))


async def main(client: Client) -> list[str]:
    TICKS.clear()
    THIRD.clear()
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[Reporter], activities=[report]):
        await client.start_workflow(
            Reporter, "daily", id="hello-cron", task_queue=TASK_QUEUE, cron_schedule="@every 1s"
        )
        await asyncio.wait_for(THIRD.wait(), 30)  # three runs, a second apart
        await client.get_workflow_handle("hello-cron").terminate(reason="the sample is over")
    return TICKS[:3]
