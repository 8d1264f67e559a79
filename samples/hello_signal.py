"""Hello, signal (Temporal: ``hello_signal``): send data into a running workflow; each signal is
recorded in its history, in arrival order."""

from __future__ import annotations

from kadence import Client, Worker, workflow

TASK_QUEUE = "hello-signal"


@workflow.defn
class Collect:
    def __init__(self) -> None:
        self.names: list[str] = []
        self.closed = False

    @workflow.signal
    def add(self, name: str) -> None:
        self.names.append(name)

    @workflow.signal
    def close(self) -> None:
        self.closed = True

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: self.closed)
        return [f"Hello, {n}!" for n in self.names]


async def main(client: Client) -> list[str]:
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[Collect]):
        handle = await client.start_workflow(Collect, id="hello-signal", task_queue=TASK_QUEUE)
        await handle.signal(Collect.add, "ann")
        await handle.signal("add", "bo")  # by name works too
        await handle.signal(Collect.close)
        return await handle.result()
