"""Hello, search attributes (Temporal: ``hello_search_attributes``): index a run by typed values
that the visibility projection filters on (``kadence list --search Customer:ann``): a keyword, a
keyword list, an int, a float, a bool or a timezone-aware datetime."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kadence import Client, Worker, workflow

TASK_QUEUE = "hello-search"
DUE = datetime(2027, 1, 15, 9, 30, tzinfo=UTC)


@workflow.defn
class Tagged:
    @workflow.run
    async def run(self) -> str:
        seen = workflow.info().search_attributes  # the start's, typed as given
        workflow.upsert_search_attributes({"Stage": "done", "Priority": seen["Priority"] + 1})
        return "tagged"


async def main(client: Client) -> dict[str, Any]:
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[Tagged]):
        handle = await client.start_workflow(
            Tagged,
            id="hello-search",
            task_queue=TASK_QUEUE,
            search_attributes={
                "Customer": "ann",
                "Tags": ["vip", "eu"],
                "Priority": 2,
                "Amount": 99.5,
                "Urgent": True,
                "Due": DUE,
                "Stage": "new",
            },
        )
        await handle.result()
        return (await handle.describe()).search_attributes
