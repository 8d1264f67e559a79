"""Task-queue rate limits: at most N activities a second across all of a queue's workers.

Run it with the project's dev stack (starts Kafka, runs this, stops Kafka):

    python3 scripts/devstack.py run -- .venv/bin/python docs/examples/rate_limits.py

It starts a history processor (a child process), limits the queue "mail" to 5 activities a
second, runs a worker and a workflow that sends 20 mails at once, and prints how long the 20
took: about 3 s (a second's worth, 5, may start at once after a quiet spell; the other 15 at 5 a
second), the limit and not the worker's 100 slots setting the pace. Then it lifts the limit and
sends 20 more, which take a few milliseconds.
"""

import asyncio
import os
import subprocess
import sys
import time
import uuid
from datetime import timedelta

from kadence import Client, Worker, activity, workflow
from kadence.topics import Catalogue, KafkaConfig

sent: list[float] = []


@activity.defn
async def send_mail(to: str) -> str:
    sent.append(time.monotonic())
    return f"sent to {to}"


@workflow.defn
class Newsletter:
    @workflow.run
    async def run(self, count: int) -> int:
        mails = [
            workflow.execute_activity(send_mail, f"reader-{i}", start_to_close_timeout=timedelta(seconds=30))
            for i in range(count)
        ]
        return len(await asyncio.gather(*mails))


async def send(client: Client, run: str) -> float:
    sent.clear()
    handle = await client.start_workflow(Newsletter, 20, id=f"newsletter-{run}", task_queue="mail")
    assert await handle.result(timeout=60) == 20
    return sent[-1] - sent[0]


async def main() -> None:
    config = KafkaConfig.from_env(namespace=f"limits{uuid.uuid4().hex[:6]}")
    Catalogue(config).apply()
    processor = subprocess.Popen(
        [sys.executable, "-m", "kadence.cli", "--log-level", "warning", "processor", "--instance-id", "limits"],
        env={**os.environ, "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap, "KADENCE_NAMESPACE": config.namespace},
    )
    try:
        client = await Client.connect(config=config)
        limit = await client.set_queue_limit("mail", 5, reason="the mail provider allows 5 a second")
        print("limit:", limit.activities_per_second, "a second,", repr(limit.reason))
        async with Worker(client, task_queue="mail", workflows=[Newsletter], activities=[send_mail]):
            print(f"limited: 20 mails in {await send(client, 'limited'):.1f} s")
            await client.set_queue_limit("mail", reason="lifted")  # nothing given: no limit
            await asyncio.sleep(1.5)  # the worker applies a change within about a second
            print(f"unlimited: 20 mails in {await send(client, 'unlimited'):.1f} s")
        print("limits now:", {q: limit.limited for q, limit in (await client.queue_limits()).items()})
        await client.close()
    finally:
        processor.terminate()
        processor.wait(30)


if __name__ == "__main__":
    asyncio.run(main())
