"""Hello, cancellation (Temporal: ``hello_cancellation``): cancelling the workflow cancels the
activity it waits for (which learns it at its next heartbeat) and lets the workflow clean up."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from kadence import ActivityError, Client, Worker, WorkflowCanceledError, activity, workflow

TASK_QUEUE = "hello-cancellation"
CLEANED: list[str] = []


@activity.defn
async def never_finishes() -> None:
    while True:
        activity.heartbeat()  # raises CancelledError once the engine says the activity is cancelled
        await asyncio.sleep(0.1)


@activity.defn
async def clean_up(reason: str) -> None:
    CLEANED.append(reason)


@workflow.defn
class CancellableWork:
    @workflow.run
    async def run(self) -> None:
        try:
            await workflow.execute_activity(
                never_finishes, start_to_close_timeout=timedelta(minutes=5), heartbeat_timeout=timedelta(seconds=2)
            )
        except (asyncio.CancelledError, ActivityError):
            await workflow.execute_activity(clean_up, "cancelled", start_to_close_timeout=timedelta(seconds=10))
            raise


async def main(client: Client) -> str:
    async with Worker(
        client, task_queue=TASK_QUEUE, workflows=[CancellableWork], activities=[never_finishes, clean_up]
    ):
        handle = await client.start_workflow(CancellableWork, id="hello-cancellation", task_queue=TASK_QUEUE)
        await asyncio.sleep(1)
        await handle.cancel()
        try:
            await handle.result()
        except WorkflowCanceledError:
            return f"canceled, cleaned up: {CLEANED}"
    return "not canceled"
