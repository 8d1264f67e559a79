"""Schedules: a report every 2 seconds, paused, triggered, backfilled, described and deleted.

Run it with the project's dev stack (starts Kafka, runs this, stops Kafka):

    python3 scripts/devstack.py run -- .venv/bin/python docs/examples/schedules.py

It starts a history processor and a timer service (child processes), the schedules' worker and
a worker for the report, creates the schedule ``reports`` (every 2 s, skip overlapping runs),
lets it run three times, pauses it, backfills the three times of the 6 s before it was created,
triggers one run by hand once those are done, and prints what ``describe`` says before deleting it. Each
run's workflow ID is the schedule's ID and the time it was for.
"""

import asyncio
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime

from kadence import (
    Client,
    ScheduleInterval,
    SchedulePolicy,
    ScheduleSpec,
    Worker,
    schedule_action,
    workflow,
)
from kadence.operations import Schedule, schedule_activities
from kadence.topics import Catalogue, KafkaConfig
from kadence.topics.schedules import SCHEDULES_TASK_QUEUE


@workflow.defn
class Report:
    @workflow.run
    async def run(self, name: str) -> str:
        return f"{name} for {workflow.info().workflow_id}"


async def until(handle, done) -> None:
    """Read the schedule's description until ``done(state)`` (a minute at most)."""
    for _ in range(300):
        if done((await handle.describe()).state):
            return
        await asyncio.sleep(0.2)
    raise TimeoutError("the schedule did not get there in a minute")


def hhmmss(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%H:%M:%S")


async def main() -> None:
    config = KafkaConfig.from_env(namespace=f"schedules{uuid.uuid4().hex[:6]}")
    Catalogue(config).apply()
    env = {**os.environ, "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap, "KADENCE_NAMESPACE": config.namespace}
    engine = [
        subprocess.Popen([sys.executable, "-m", "kadence.cli", "--log-level", "warning", *args], env=env)
        for args in (["processor", "--instance-id", "schedules"], ["timers"])  # a schedule's clock is a timer
    ]
    try:
        client = await Client.connect(config=config)
        async with (
            # what `kadence schedules worker` runs
            Worker(
                client, task_queue=SCHEDULES_TASK_QUEUE, workflows=[Schedule], activities=schedule_activities(client)
            ),
            Worker(client, task_queue="reports", workflows=[Report]),
        ):
            handle = await client.create_schedule(
                "reports",
                spec=ScheduleSpec(intervals=[ScheduleInterval(every_ms=2000)]),
                action=schedule_action(Report, "sales", task_queue="reports"),
                policy=SchedulePolicy(overlap="skip"),
            )
            await until(handle, lambda state: state.actions >= 3)
            await handle.pause("enough for the example")
            created = (await handle.describe()).state.created_ms
            print("backfilled:", await handle.backfill(created - 6000, created - 1, overlap="allow_all"))
            # until the backfill's runs are done: by the schedule's policy (skip) a trigger would be skipped
            await until(handle, lambda state: state.actions >= 6 and not state.running)
            print("triggered at:", hhmmss(await handle.trigger()))
            await until(handle, lambda state: state.actions >= 7)
            desc = await handle.describe()
            print("paused:", desc.state.paused, "-", desc.state.note)
            print("runs started:", desc.state.actions)
            for run in desc.state.recent[-7:]:
                print(" ", hhmmss(run.nominal_ms), run.workflow_id, run.status)
            await handle.delete()
        await client.close()
    finally:
        for proc in engine:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    asyncio.run(main())
