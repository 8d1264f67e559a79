"""Hello, search attributes (Temporal: ``hello_search_attributes``): index a run by values that the
visibility projection filters on (``kadence list --search key:value``). Values are strings."""

from __future__ import annotations

from kadence import Client, Worker, workflow

TASK_QUEUE = "hello-search"


@workflow.defn
class Tagged:
    @workflow.run
    async def run(self) -> str:
        workflow.upsert_search_attributes({"Stage": "done"})
        return "tagged"


async def main(client: Client) -> dict[str, str]:
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[Tagged]):
        handle = await client.start_workflow(
            Tagged, id="hello-search", task_queue=TASK_QUEUE, search_attributes={"Customer": "ann", "Stage": "new"}
        )
        await handle.result()
        return (await handle.describe()).search_attributes
