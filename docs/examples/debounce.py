"""Debounced starts: a burst of starts of one workflow ID gives one run, after the last of them,
with the last input.

Run it with the project's dev stack (starts Kafka, runs this, stops Kafka):

    python3 scripts/devstack.py run -- .venv/bin/python docs/examples/debounce.py

It starts a history processor and a timer service (child processes) and a worker, then saves a
document 20 times in quick succession; each save starts the reindex workflow of the document
with ``debounce=2 s``. Every start is answered with the same run ID; the reindex runs once, two
seconds after the last save, with the last save's version. It prints the run IDs it got, the
result, and how the history recorded the burst.
"""

import asyncio
import os
import subprocess
import sys
import uuid
from datetime import timedelta

from kadence import Client, Worker, workflow
from kadence.topics import Catalogue, KafkaConfig


@workflow.defn
class Reindex:
    @workflow.run
    async def run(self, version: int) -> str:
        return f"reindexed version {version}"


async def main() -> None:
    config = KafkaConfig.from_env(namespace=f"debounce{uuid.uuid4().hex[:6]}")
    Catalogue(config).apply()
    env = {**os.environ, "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap, "KADENCE_NAMESPACE": config.namespace}
    engine = [
        subprocess.Popen([sys.executable, "-m", "kadence.cli", "--log-level", "warning", *args], env=env)
        for args in (["processor", "--instance-id", "debounce"], ["timers"])  # the wait is a durable timer
    ]
    try:
        client = await Client.connect(config=config)
        async with Worker(client, task_queue="docs", workflows=[Reindex]):
            handles = []
            for version in range(1, 21):  # 20 saves, 50 ms apart
                handles.append(
                    await client.start_workflow(
                        Reindex,
                        version,
                        id="reindex-doc-42",
                        task_queue="docs",
                        debounce=timedelta(seconds=2),  # run once the saves pause for 2 s
                        debounce_max=timedelta(minutes=1),  # and at the latest a minute after the first
                    )
                )
                await asyncio.sleep(0.05)
            print("run IDs:", len({h.run_id for h in handles}))
            print("result:", await handles[0].result(timeout=60))
        kinds = [e["type"] for e in await handles[0].history()]
        print("history:", kinds[0], "+", kinds.count("WorkflowStartDebounced"), "x WorkflowStartDebounced")
        await client.close()
    finally:
        for proc in engine:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    asyncio.run(main())
