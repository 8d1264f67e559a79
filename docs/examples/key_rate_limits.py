"""Rate limits per key: at most N starts (or activity calls) of a key in any window, the rest
delayed in the order they asked, not dropped.

Run it with the project's dev stack (starts Kafka, runs this, stops Kafka):

    python3 scripts/devstack.py run -- .venv/bin/python docs/examples/key_rate_limits.py

It starts a history processor and a timer service (child processes) and a worker, then 10
signups at once. Each run is admitted by the start rate of its region (2 a second), and its
welcome mail by the mail provider's call rate (3 a second, across every run). It prints what
``describe`` says about the last signup while it waits, how long the 10 took (about 4.5 s: 2 at
once, then 2 a second), and what ``kadence limits`` shows of both keys.
"""

import asyncio
import os
import subprocess
import sys
import time
import uuid
from datetime import timedelta

from kadence import Client, Limit, Worker, activity, workflow
from kadence.topics import Catalogue, KafkaConfig
from kadence.topics.concurrency_reader import read_limits

SECOND = timedelta(seconds=1)


@activity.defn
async def send_welcome(user: str) -> str:
    return f"welcome sent to {user}"


@workflow.defn
class Signup:
    @workflow.run
    async def run(self, user: str) -> str:
        return await workflow.execute_activity(
            send_welcome,
            user,
            start_to_close_timeout=timedelta(seconds=30),
            concurrency=[Limit("api", "mailer", max=3, per=SECOND)],  # the provider's quota
        )


async def main() -> None:
    config = KafkaConfig.from_env(namespace=f"rates{uuid.uuid4().hex[:6]}")
    Catalogue(config).apply()
    env = {**os.environ, "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap, "KADENCE_NAMESPACE": config.namespace}
    engine = [
        subprocess.Popen([sys.executable, "-m", "kadence.cli", "--log-level", "warning", *args], env=env)
        for args in (["processor", "--instance-id", "rates"], ["timers"])  # a delayed start waits on a timer
    ]
    try:
        client = await Client.connect(config=config)
        began = time.monotonic()
        handles = [
            await client.start_workflow(
                Signup,
                f"user-{i}",
                id=f"signup-{i}",
                task_queue="signups",
                concurrency=[Limit("signup", "eu", max=2, per=SECOND)],  # 2 signups a second
            )
            for i in range(10)
        ]
        last = await client.get_workflow_handle("signup-9").describe()
        while last.throttled_until is None:  # its start is on its way to the engine
            await asyncio.sleep(0.05)
            last = await client.get_workflow_handle("signup-9").describe()
        print("signup-9 delayed: its code runs at", last.throttled_until.isoformat())
        async with Worker(client, task_queue="signups", workflows=[Signup], activities=[send_welcome]):
            results = await asyncio.gather(*(h.result(timeout=120) for h in handles))
        print("welcomed:", len(results))
        print(f"took: {time.monotonic() - began:.1f} s")
        for lim in await asyncio.to_thread(read_limits, config):
            print(f"limit: {lim['key']} {lim['max']} per {lim['per_seconds']:g}s, admitted {lim['granted']}")
        await client.close()
    finally:
        for proc in engine:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    asyncio.run(main())
