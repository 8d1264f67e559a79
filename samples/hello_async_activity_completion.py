"""Hello, async activity completion (Temporal: ``hello_async_activity_completion``): the activity
hands its task token to someone else and returns without a result; they complete it later."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from kadence import Client, Worker, activity, workflow

TASK_QUEUE = "hello-async-completion"

#: what a real activity would hand to another system (a queue, a ticket, an e-mail link)
HANDED_OUT: asyncio.Queue[bytes] = asyncio.Queue()


@activity.defn
async def ask_a_human(question: str) -> str:
    HANDED_OUT.put_nowait(activity.info().task_token)
    activity.raise_complete_async()


@workflow.defn
class AskAHuman:
    @workflow.run
    async def run(self, question: str) -> str:
        return await workflow.execute_activity(ask_a_human, question, start_to_close_timeout=timedelta(minutes=10))


async def main(client: Client) -> str:
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[AskAHuman], activities=[ask_a_human]):
        handle = await client.start_workflow(AskAHuman, "ship it?", id="hello-async-completion", task_queue=TASK_QUEUE)
        token = await asyncio.wait_for(HANDED_OUT.get(), 60)
        await client.get_async_activity_handle(token).complete("yes, ship it")  # anywhere, any process
        return await handle.result()
