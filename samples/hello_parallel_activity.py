"""Hello, parallel activities (Temporal: ``hello_parallel_activity``): start several activities
and wait for all of them with ``asyncio.gather``."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from kadence import Client, Worker, activity, workflow

TASK_QUEUE = "hello-parallel"


@activity.defn
async def greet(name: str) -> str:
    return f"Hello, {name}!"


@workflow.defn
class GreetAll:
    @workflow.run
    async def run(self, names: list[str]) -> list[str]:
        calls = [workflow.execute_activity(greet, n, start_to_close_timeout=timedelta(seconds=10)) for n in names]
        return sorted(await asyncio.gather(*calls))


async def main(client: Client) -> list[str]:
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[GreetAll], activities=[greet]):
        return await client.execute_workflow(GreetAll, ["b", "a", "c"], id="hello-parallel", task_queue=TASK_QUEUE)
