"""Hello, local activity (Temporal: ``hello_local_activity``): a short activity run by the worker
that runs the workflow task, recorded as a marker: fewer trips through the engine."""

from __future__ import annotations

from datetime import timedelta

from kadence import Client, Worker, activity, workflow

TASK_QUEUE = "hello-local"


@activity.defn
async def shout(text: str) -> str:
    return text.upper()


@workflow.defn
class Shout:
    @workflow.run
    async def run(self, text: str) -> str:
        return await workflow.execute_local_activity(shout, text, start_to_close_timeout=timedelta(seconds=5))


async def main(client: Client) -> str:
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[Shout], activities=[shout]):
        return await client.execute_workflow(Shout, "hello, local", id="hello-local", task_queue=TASK_QUEUE)
