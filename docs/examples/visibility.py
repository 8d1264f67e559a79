"""Visibility: list and count workflow runs from the Redis projection.

Run it with the project's dev stack (starts Kafka and Redis, runs this, stops them):

    python3 scripts/devstack.py run -- .venv/bin/python docs/examples/visibility.py

It creates a namespace, starts a history processor and the projection process (child
processes, as in production), runs a worker here, starts a few workflows with search attributes,
waits until the projection reflects them (read-your-writes on the last one), then lists them.
"""

import asyncio
import os
import subprocess
import sys
import uuid

import redis.asyncio as aioredis

from kadence import Client, Worker, workflow
from kadence.readmodels import VisibilityFilter, VisibilityReader
from kadence.topics import Catalogue, KafkaConfig


@workflow.defn
class Tagged:
    @workflow.run
    async def run(self, n: int) -> int:
        workflow.upsert_search_attributes({"parity": "even" if n % 2 == 0 else "odd"})
        return n


async def main() -> None:
    config = KafkaConfig.from_env(namespace=f"vis{uuid.uuid4().hex[:6]}")
    Catalogue(config).apply()
    env = {**os.environ, "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap, "KADENCE_NAMESPACE": config.namespace}
    quiet = [sys.executable, "-m", "kadence.cli", "--log-level", "warning"]
    procs = [
        subprocess.Popen([*quiet, "processor", "--instance-id", "vis"], env=env),
        subprocess.Popen([*quiet, "projections", "run"], env=env),
    ]
    redis = aioredis.from_url(os.environ.get("KADENCE_REDIS_URL", "redis://127.0.0.1:6379/0"))
    try:
        client = await Client.connect(config=config)
        async with Worker(client, task_queue="vis", workflows=[Tagged]):
            for n in range(6):
                handle = await client.start_workflow(
                    Tagged, n, id=f"tagged-{n}", task_queue="vis", search_attributes={"team": "demo"}
                )
                await handle.result(timeout=60)
        await client.close()
        visibility = VisibilityReader(redis, config.namespace)
        last = await visibility.describe("tagged-5")
        while last is None or last["status"] != "completed":  # the projection follows the history
            await asyncio.sleep(0.2)
            last = await visibility.describe("tagged-5")
        items, _cursor = await visibility.list(VisibilityFilter(search={"parity": "even"}), page_size=10)
        print("even:", sorted(r["workflow_id"] for r in items))
        print("counts:", await visibility.count(VisibilityFilter(search={"team": "demo"})))
    finally:
        await redis.aclose()
        for p in procs:
            p.terminate()
            p.wait(30)


if __name__ == "__main__":
    asyncio.run(main())
