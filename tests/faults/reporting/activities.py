"""Activities for the reported-activities drill: each execution is appended to a log file, so the
test can count how often each ran (``python -m tests.faults.reporting.activities`` is the worker)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from datetime import timedelta

from kadence import Client, KafkaConfig, Worker, activity, workflow

QUEUE = "reported-activities"
T = timedelta(seconds=30)


def _record(what: str) -> None:
    with open(os.environ["KADENCE_TEST_EXECUTIONS"], "a") as f:
        f.write(f"{what}|{activity.info().activity_id}|{activity.info().attempt}|{os.getpid()}\n")


@activity.defn
async def quick(i: int) -> int:
    _record(f"quick-{i}")
    return i


@activity.defn
async def slow() -> str:
    """Holds the lowest offset of the partition in flight while the quick ones above it report."""
    _record("slow")
    await asyncio.sleep(float(os.environ.get("KADENCE_TEST_SLOW_S", "3")))
    return "slow"


@workflow.defn(name="FanOut")
class FanOut:
    @workflow.run
    async def run(self, n: int) -> list:
        first = workflow.execute_activity(slow, task_queue=QUEUE, start_to_close_timeout=T)
        rest = [workflow.execute_activity(quick, i, task_queue=QUEUE, start_to_close_timeout=T) for i in range(n)]
        return [await first, *[await r for r in rest]]


async def main() -> None:
    client = await Client.connect(config=KafkaConfig.from_env())
    worker = Worker(
        client,
        task_queue=QUEUE,
        activities=[quick, slow],
        session_timeout_ms=6000,
        transactional_activity_results=os.environ.get("KADENCE_WORKER_TXN_RESULTS", "1") != "0",
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.shutdown)
    try:
        await worker.run()
    finally:
        await client.close()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kadence._reporter").setLevel(logging.DEBUG)
    asyncio.run(main())
