"""Workflow streams: an activity streams its progress, exactly once, to a reader that follows it
live, and the workflow streams its own steps.

Run it with the project's dev stack (starts Kafka, runs this, stops Kafka):

    python3 scripts/devstack.py run -- .venv/bin/python docs/examples/streams.py

It starts a history processor and a timer service (child processes) and a worker, starts the
workflow ``summary-1`` and follows its stream ``progress`` while it runs. The activity publishes
three lines per attempt and fails its first attempt: only the second attempt's lines reach the
reader, each once. Then it resumes the stream after its second event, as a reader that lost its
connection would (the gateway's Server-Sent Events do the same with ``Last-Event-ID``).
"""

import asyncio
import os
import subprocess
import sys
import uuid
from datetime import timedelta

from kadence import Client, RetryPolicy, Worker, activity, workflow
from kadence.topics import Catalogue, KafkaConfig


@activity.defn
async def summarize(document: str) -> str:
    attempt = activity.info().attempt
    for part in ("reading", "thinking", "writing"):
        activity.publish("progress", f"{part} {document} (attempt {attempt})")
    if attempt == 1:
        raise RuntimeError("the model timed out")  # what attempt 1 published is never read
    return f"a summary of {document}"


@workflow.defn
class Summary:
    @workflow.run
    async def run(self, document: str) -> str:
        workflow.publish("progress", "started")  # once, even when this code is replayed
        result = await workflow.execute_activity(
            summarize,
            document,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200)),
        )
        workflow.publish("progress", "done")
        return result


async def main() -> None:
    config = KafkaConfig.from_env(namespace=f"streams{uuid.uuid4().hex[:6]}")
    Catalogue(config).apply()
    env = {**os.environ, "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap, "KADENCE_NAMESPACE": config.namespace}
    engine = [
        subprocess.Popen([sys.executable, "-m", "kadence.cli", "--log-level", "warning", *args], env=env)
        for args in (["processor", "--instance-id", "streams"], ["timers"])  # (the retry's backoff is a timer)
    ]
    try:
        client = await Client.connect(config=config)
        async with Worker(client, task_queue="summaries", workflows=[Summary], activities=[summarize]):
            handle = await client.start_workflow(Summary, "report.pdf", id="summary-1", task_queue="summaries")
            events = []
            async for event in handle.stream("progress"):  # live; ends when the workflow closes
                print(f"{event.id}: {event.value}")
                events.append(event)
            print("result:", await handle.result())
            resumed = [event.value async for event in handle.stream("progress", after=events[1].id)]
            print("resumed after event", events[1].id, "->", resumed)
        await client.close()
    finally:
        for proc in engine:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    asyncio.run(main())
