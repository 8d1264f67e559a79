"""Hello, child workflow (Temporal: ``hello_child_workflow``): a workflow starts another and waits
for its result."""

from __future__ import annotations

from kadence import Client, Worker, workflow

TASK_QUEUE = "hello-child"


@workflow.defn
class ComposeGreetingChild:
    @workflow.run
    async def run(self, name: str) -> str:
        return f"Hello, {name}!"


@workflow.defn
class GreetingParent:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_child_workflow(
            ComposeGreetingChild.run, name, id=f"{workflow.info().workflow_id}/child"
        )


async def main(client: Client) -> str:
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[GreetingParent, ComposeGreetingChild]):
        return await client.execute_workflow(GreetingParent, "child", id="hello-child", task_queue=TASK_QUEUE)
