"""Hello, sync activity (Temporal: ``hello_activity_threaded``): a plain ``def`` activity runs in the
worker's own threads (or the ``activity_executor`` you pass), so blocking calls do not stall it."""

from __future__ import annotations

import time
from datetime import timedelta

from kadence import Client, Worker, activity, workflow

TASK_QUEUE = "hello-sync"


@activity.defn
def blocking_greeting(name: str) -> str:
    time.sleep(0.05)  # a blocking client library, say
    return f"Hello, {name}!"


@workflow.defn
class SyncGreeting:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(blocking_greeting, name, start_to_close_timeout=timedelta(seconds=10))


async def main(client: Client) -> str:
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[SyncGreeting], activities=[blocking_greeting]):
        return await client.execute_workflow(SyncGreeting, "threads", id="hello-sync", task_queue=TASK_QUEUE)
