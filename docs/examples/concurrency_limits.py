"""Concurrency limits: at most N runs of a tenant, and at most M calls of an API, at once.

Run it with the project's dev stack (starts Kafka, runs this, stops Kafka):

    python3 scripts/devstack.py run -- .venv/bin/python docs/examples/concurrency_limits.py

It starts a history processor (a child process) and a worker, then 12 imports: 8 of tenant
"acme" and 4 of tenant "tiny". Each import holds a slot of its tenant's limit (at most 3 at
once) while it runs, and its upload activity holds a slot of the storage API's limit (at most 2
at once, across all tenants). It prints the most imports and uploads it saw at once, which
never exceed the limits, and what ``describe`` says about a run that is still waiting.
"""

import asyncio
import os
import subprocess
import sys
import uuid
from datetime import timedelta

from kadence import Client, Limit, Worker, activity, workflow
from kadence.topics import Catalogue, KafkaConfig

running = {"imports": 0, "uploads": 0}
most = {"imports": 0, "uploads": 0}


def _enter(what: str) -> None:
    running[what] += 1
    most[what] = max(most[what], running[what])


@activity.defn
async def upload(batch: str) -> str:
    _enter("uploads")
    try:
        await asyncio.sleep(0.2)  # the storage API's call
        return f"{batch} stored"
    finally:
        running["uploads"] -= 1


@activity.defn
async def parse(batch: str) -> str:
    _enter("imports")
    await asyncio.sleep(0.3)
    running["imports"] -= 1
    return batch


@workflow.defn
class Import:
    @workflow.run
    async def run(self, batch: str) -> str:
        timeout = timedelta(seconds=30)
        parsed = await workflow.execute_activity(parse, batch, start_to_close_timeout=timeout)
        # at most 2 uploads at once, whichever tenant asks
        return await workflow.execute_activity(
            upload, parsed, start_to_close_timeout=timeout, concurrency=[Limit("api", "storage", max=2)]
        )


async def main() -> None:
    config = KafkaConfig.from_env(namespace=f"concurrency{uuid.uuid4().hex[:6]}")
    Catalogue(config).apply()
    processor = subprocess.Popen(
        [sys.executable, "-m", "kadence.cli", "--log-level", "warning", "processor", "--instance-id", "limits"],
        env={**os.environ, "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap, "KADENCE_NAMESPACE": config.namespace},
    )
    try:
        client = await Client.connect(config=config)
        handles = []
        for i in range(12):
            tenant = "acme" if i < 8 else "tiny"
            handles.append(
                await client.start_workflow(
                    Import,
                    f"{tenant}-batch-{i}",
                    id=f"import-{tenant}-{i}",
                    task_queue="imports",
                    concurrency=[Limit("tenant", tenant, max=3)],  # at most 3 imports of a tenant at once
                )
            )
        # no worker yet: the first 3 of each tenant hold their slots, the others wait
        waiting = await client.get_workflow_handle("import-acme-7").describe()
        while (waiting.waiting_for_slot or {}).get("reason") is None:
            await asyncio.sleep(0.1)
            waiting = await client.get_workflow_handle("import-acme-7").describe()
        print("import-acme-7:", waiting.waiting_for_slot["reason"])
        async with Worker(client, task_queue="imports", workflows=[Import], activities=[parse, upload]):
            results = await asyncio.gather(*(h.result(timeout=120) for h in handles))
        print("stored:", len(results))
        print("most imports at once:", most["imports"], "(at most 3 per tenant)")
        print("most uploads at once:", most["uploads"])
        await client.close()
    finally:
        processor.terminate()
        processor.wait(30)


if __name__ == "__main__":
    asyncio.run(main())
