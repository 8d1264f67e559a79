"""A complete Kadence program: a workflow with two activities, run against a real broker.

Run it with the project's dev stack (starts Kafka, runs this, stops Kafka):

    python3 scripts/devstack.py run -- .venv/bin/python docs/examples/hello.py

It creates a namespace, starts a history processor (a child process, as in production), runs a
worker in this process, starts a workflow, and prints its result and history.
"""

import asyncio
import os
import subprocess
import sys
import uuid
from datetime import timedelta

from kadence import Client, Worker, activity, workflow
from kadence.topics import Catalogue, KafkaConfig


@activity.defn
async def greet(name: str) -> str:
    return f"Hello, {name}!"


@activity.defn
def shout(text: str) -> str:  # sync activities run in a thread pool
    return text.upper()


@workflow.defn
class HelloWorkflow:
    @workflow.run
    async def run(self, name: str) -> str:
        text = await workflow.execute_activity(greet, name, start_to_close_timeout=timedelta(seconds=10))
        return await workflow.execute_activity(shout, text, start_to_close_timeout=timedelta(seconds=10))


async def main() -> None:
    config = KafkaConfig.from_env(namespace=f"hello{uuid.uuid4().hex[:6]}")
    Catalogue(config).apply()  # the same as `kadence topics apply`
    processor = subprocess.Popen(
        [sys.executable, "-m", "kadence.cli", "--log-level", "warning", "processor", "--instance-id", "hello"],
        env={**os.environ, "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap, "KADENCE_NAMESPACE": config.namespace},
    )
    try:
        client = await Client.connect(config=config)
        worker = Worker(client, task_queue="hello", workflows=[HelloWorkflow], activities=[greet, shout])
        async with worker:
            handle = await client.start_workflow(HelloWorkflow, "Kafka", id="hello-1", task_queue="hello")
            print("result:", await handle.result(timeout=60))
            for event in await handle.history():
                print(f"{event['seq']:>3} {event['type']}")
            # each activity's result carried the workflow's next task (eager workflow tasks):
            # only the first workflow task went through Kafka
            print("eager workflow tasks:", worker.stats["eager_workflow_tasks"])
            # start and wait in one call (the result is asked for with the start)
            print(
                "execute:",
                await client.execute_workflow(
                    HelloWorkflow, "again", id="hello-2", task_queue="hello", result_timeout=60
                ),
            )
        await client.close()
    finally:
        processor.terminate()
        processor.wait(30)


if __name__ == "__main__":
    asyncio.run(main())
