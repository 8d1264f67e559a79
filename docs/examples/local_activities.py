"""Local activities: short side effects run inside the workflow task, recorded as markers.

Run it with the project's dev stack (starts Kafka, runs this, stops Kafka):

    python3 scripts/devstack.py run -- .venv/bin/python docs/examples/local_activities.py

It starts a history processor (a child process), runs a worker in this process, and runs a
workflow that prices three items with a local activity each: one workflow task in all. It prints
the result, the history (three MarkerRecorded events, no activity task), and the worker's counts.
"""

import asyncio
import os
import subprocess
import sys
import uuid
from datetime import timedelta

from kadence import Client, RetryPolicy, Worker, activity, workflow
from kadence.topics import Catalogue, KafkaConfig

PRICES = {"tea": 4, "cake": 6, "jam": 3}


@activity.defn
async def lookup_price(sku: str) -> int:
    return PRICES.get(sku, 0)


@workflow.defn
class Quote:
    @workflow.run
    async def run(self, skus: list[str]) -> int:
        total = 0
        for sku in skus:
            total += await workflow.execute_local_activity(
                lookup_price,
                sku,
                start_to_close_timeout=timedelta(seconds=2),
                retry_policy=RetryPolicy(maximum_attempts=5),
            )
        return total


async def main() -> None:
    config = KafkaConfig.from_env(namespace=f"local{uuid.uuid4().hex[:6]}")
    Catalogue(config).apply()
    processor = subprocess.Popen(
        [sys.executable, "-m", "kadence.cli", "--log-level", "warning", "processor", "--instance-id", "local"],
        env={**os.environ, "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap, "KADENCE_NAMESPACE": config.namespace},
    )
    try:
        client = await Client.connect(config=config)
        worker = Worker(client, task_queue="quotes", workflows=[Quote], activities=[lookup_price])
        async with worker:
            handle = await client.start_workflow(Quote, ["tea", "cake", "jam"], id="quote-1", task_queue="quotes")
            print("total:", await handle.result(timeout=60))
            for event in await handle.history():
                print(f"{event['seq']:>3} {event['type']}")
            print(
                "workflow tasks:",
                worker.stats["workflow_tasks"],
                "local activities:",
                worker.stats["local_activities_completed"],
            )
        await client.close()
    finally:
        processor.terminate()
        processor.wait(30)


if __name__ == "__main__":
    asyncio.run(main())
