"""Hello, query (Temporal: ``hello_query``): read a running workflow's state; nothing is written."""

from __future__ import annotations

from kadence import Client, Worker, workflow

TASK_QUEUE = "hello-query"


@workflow.defn
class Greeter:
    def __init__(self) -> None:
        self.greeting = ""
        self.done = False

    @workflow.query
    def current(self) -> str:
        return self.greeting

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.run
    async def run(self, name: str) -> str:
        self.greeting = f"Hello, {name}!"
        await workflow.wait_condition(lambda: self.done)
        self.greeting = f"Goodbye, {name}!"
        return self.greeting


async def main(client: Client) -> list[str]:
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[Greeter]):
        handle = await client.start_workflow(Greeter, "query", id="hello-query", task_queue=TASK_QUEUE)
        first = await handle.query(Greeter.current)
        await handle.signal(Greeter.finish)
        await handle.result()
        return [first, await handle.query(Greeter.current)]  # a closed run answers from its final state
