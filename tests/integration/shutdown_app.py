"""A worker process for the graceful shutdown test (``test_activity_lifecycle.py``): it starts a
workflow whose three activities are all running when the worker shuts down (one async, one sync
that watches ``activity.is_cancelled()``, one sync that ignores cancellation), and prints what
each one saw. Run as ``python -m tests.integration.shutdown_app BOOTSTRAP NAMESPACE WORKFLOW_ID``."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from datetime import timedelta

from kadence import Client, Worker, activity, workflow

STARTED = {name: threading.Event() for name in ("polite_sync", "polite_async", "stubborn_sync")}
T = timedelta(minutes=5)


@activity.defn
def polite_sync(n: int) -> str:
    STARTED["polite_sync"].set()
    while not activity.is_cancelled():
        activity.heartbeat(n)
        time.sleep(0.05)
    print(f"polite_sync saw the cancellation (worker shutdown: {activity.is_worker_shutdown()})", flush=True)
    raise asyncio.CancelledError


@activity.defn
async def polite_async(n: int) -> str:
    STARTED["polite_async"].set()
    try:
        await activity.wait_for_cancelled()
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        print(f"polite_async was cancelled (worker shutdown: {activity.is_worker_shutdown()})", flush=True)
        raise
    return "never"


@activity.defn
def stubborn_sync(n: int) -> str:
    STARTED["stubborn_sync"].set()
    time.sleep(3600)  # ignores its cancellation: abandoned after the graceful timeout
    return "never"


@workflow.defn
class ThreeRunning:
    @workflow.run
    async def run(self) -> list[str]:
        return list(
            await asyncio.gather(
                workflow.execute_activity(polite_sync, 1, start_to_close_timeout=T),
                workflow.execute_activity(polite_async, 2, start_to_close_timeout=T),
                workflow.execute_activity(stubborn_sync, 3, start_to_close_timeout=T),
            )
        )


async def main(bootstrap: str, namespace: str, workflow_id: str) -> None:
    client = await Client.connect(bootstrap, namespace=namespace)
    worker = Worker(
        client,
        task_queue="shutdown",
        workflows=[ThreeRunning],
        activities=[polite_sync, polite_async, stubborn_sync],
        graceful_shutdown_timeout=timedelta(seconds=2),
    )
    runner = asyncio.get_running_loop().create_task(worker.run())
    await client.start_workflow(ThreeRunning, id=workflow_id, task_queue="shutdown")
    while not all(e.is_set() for e in STARTED.values()):
        await asyncio.sleep(0.05)
    print("all three running; shutting down", flush=True)
    began = time.monotonic()
    worker.shutdown()
    await runner
    print(f"worker stopped in {time.monotonic() - began:.2f} s", flush=True)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
