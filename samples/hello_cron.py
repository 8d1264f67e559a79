"""Hello, cron-like (Temporal: ``hello_cron``): Kadence has no ``cron_schedule=`` yet (schedules
are issue 47). Meanwhile a workflow that sleeps until the next tick and continues as new does the
same on durable timers: each tick is one short run, and no tick is lost across restarts."""

from __future__ import annotations

from datetime import timedelta

from kadence import Client, Worker, activity, workflow

TASK_QUEUE = "hello-cron"


@activity.defn
async def tick(n: int) -> str:
    return f"tick {n}"


@workflow.defn
class Every:
    @workflow.run
    async def run(self, period_s: float, ticks_left: int, done: int = 0) -> int:
        await workflow.execute_activity(tick, done, start_to_close_timeout=timedelta(seconds=10))
        if ticks_left > 1:
            await workflow.sleep(period_s)  # a durable timer: seconds or months
            workflow.continue_as_new(period_s, ticks_left - 1, done + 1)
        return done + 1


async def main(client: Client) -> int:
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[Every], activities=[tick]):
        return await client.execute_workflow(Every, 0.1, 3, id="hello-cron", task_queue=TASK_QUEUE)
