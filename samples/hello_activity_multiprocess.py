"""Hello, multiprocess (Temporal: ``hello_activity_multiprocess``): CPU-bound sync activities run
in a process pool; heartbeats from the child process reach the engine."""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
from datetime import timedelta
from typing import Any

from kadence import Client, Worker, activity, workflow

TASK_QUEUE = "hello-multiprocess"


@activity.defn
def digest(rounds: int) -> dict[str, Any]:
    value = b"kadence"
    for i in range(rounds):
        value = hashlib.sha256(value).digest()
        if i % 10_000 == 0:
            activity.heartbeat(i)
    return {"digest": value.hex()[:16], "pid": os.getpid()}


@workflow.defn
class Digest:
    @workflow.run
    async def run(self, rounds: int) -> dict[str, Any]:
        return await workflow.execute_activity(
            digest, rounds, start_to_close_timeout=timedelta(seconds=60), heartbeat_timeout=timedelta(seconds=10)
        )


async def main(client: Client) -> dict[str, Any]:
    with concurrent.futures.ProcessPoolExecutor(max_workers=1) as pool:
        async with Worker(
            client, task_queue=TASK_QUEUE, workflows=[Digest], activities=[digest], activity_executor=pool
        ):
            out = await client.execute_workflow(Digest, 50_000, id="hello-multiprocess", task_queue=TASK_QUEUE)
    return {"digest": out["digest"], "in_a_child_process": out["pid"] != os.getpid()}
