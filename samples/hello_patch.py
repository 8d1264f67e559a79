"""Hello, patch (Temporal: ``hello_patch``): change the code of open workflows safely; runs that
started before the change keep their path, new ones take the new one."""

from __future__ import annotations

from datetime import timedelta

from kadence import Client, Worker, activity, workflow

TASK_QUEUE = "hello-patch"


@activity.defn
async def old_greeting(name: str) -> str:
    return f"Hi, {name}"


@activity.defn
async def new_greeting(name: str) -> str:
    return f"Hello, {name}!"


@workflow.defn(name="Patched")
class PatchedV2:
    @workflow.run
    async def run(self, name: str) -> str:
        if workflow.patched("new-greeting"):  # new runs, and open runs from their next step on
            return await workflow.execute_activity(new_greeting, name, start_to_close_timeout=timedelta(seconds=10))
        return await workflow.execute_activity(old_greeting, name, start_to_close_timeout=timedelta(seconds=10))


async def main(client: Client) -> str:
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[PatchedV2], activities=[old_greeting, new_greeting]):
        return await client.execute_workflow(PatchedV2, "patch", id="hello-patch", task_queue=TASK_QUEUE)
