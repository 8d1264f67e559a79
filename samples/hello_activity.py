"""Hello, activity (Temporal: ``hello_activity``): a workflow calls one activity and returns its result."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from kadence import Client, Worker, activity, workflow

TASK_QUEUE = "hello-activity"


@dataclass
class Greeting:
    salutation: str
    name: str


@activity.defn
async def compose_greeting(greeting: Greeting) -> str:
    return f"{greeting.salutation}, {greeting.name}!"


@workflow.defn
class GreetingWorkflow:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            compose_greeting, Greeting("Hello", name), start_to_close_timeout=timedelta(seconds=10)
        )


async def main(client: Client) -> str:
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[GreetingWorkflow], activities=[compose_greeting]):
        return await client.execute_workflow(GreetingWorkflow, "World", id="hello-activity", task_queue=TASK_QUEUE)
