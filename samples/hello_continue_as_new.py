"""Hello, continue-as-new (Temporal: ``hello_continue_as_new``): a long loop starts a fresh run
with new arguments, so that no run's history grows without end."""

from __future__ import annotations

from kadence import Client, Worker, workflow

TASK_QUEUE = "hello-continue-as-new"


@workflow.defn
class Looping:
    @workflow.run
    async def run(self, iteration: int) -> int:
        await workflow.sleep(0.05)
        if iteration < 4:
            workflow.continue_as_new(iteration + 1)
        return iteration


async def main(client: Client) -> int:
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[Looping]):
        return await client.execute_workflow(Looping, 0, id="hello-continue-as-new", task_queue=TASK_QUEUE)
