"""Priority and fairness: an urgent task jumps a backlog, and a small tenant is not starved by a
big tenant's burst on the same task queue.

Run it with the project's dev stack (starts Kafka, runs this, stops Kafka):

    python3 scripts/devstack.py run -- .venv/bin/python docs/examples/priority.py

It starts a history processor (a child process) and two workers: one runs the workflows, one
runs the activities of the ``exports`` queue, one at a time. Tenant "big" starts an export of
300 files (priority level 5, fairness key "big"); tenant "small" then starts one of 5 files
(fairness key "small"), and an urgent refund check (level 1) comes last. It prints the order in
which the activities ran: the refund check first of everything still waiting, the small
tenant's files every other turn instead of after the big tenant's 300.
"""

import asyncio
import os
import subprocess
import sys
import uuid
from datetime import timedelta

from kadence import Client, Priority, Worker, activity, workflow
from kadence.topics import Catalogue, KafkaConfig

ORDER: list[str] = []
UNDER_WAY = asyncio.Event()  # set once 20 files are done


@activity.defn
async def export_file(tenant: str, n: int) -> None:
    ORDER.append(tenant)
    if len(ORDER) >= 20:
        UNDER_WAY.set()
    await asyncio.sleep(0.01)


@workflow.defn
class Export:
    @workflow.run
    async def run(self, tenant: str, files: int) -> int:
        # the activities inherit the run's priority (its level and fairness key)
        await asyncio.gather(
            *(
                workflow.execute_activity(
                    export_file, tenant, n, task_queue="exports", start_to_close_timeout=timedelta(minutes=1)
                )
                for n in range(files)
            )
        )
        return files


@workflow.defn
class RefundCheck:
    @workflow.run
    async def run(self) -> None:
        await workflow.execute_activity(
            export_file,
            "URGENT",
            0,
            task_queue="exports",
            start_to_close_timeout=timedelta(minutes=1),
            priority=1,  # an activity's own priority: level 1 goes first
        )


async def main() -> None:
    config = KafkaConfig.from_env(namespace=f"priority{uuid.uuid4().hex[:6]}")
    Catalogue(config).apply()
    env = {**os.environ, "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap, "KADENCE_NAMESPACE": config.namespace}
    engine = subprocess.Popen(
        [sys.executable, "-m", "kadence.cli", "--log-level", "warning", "processor", "--instance-id", "priority"],
        env=env,
    )
    try:
        client = await Client.connect(config=config)
        async with (
            Worker(client, task_queue="flows", workflows=[Export, RefundCheck]),
            Worker(client, task_queue="exports", activities=[export_file], max_concurrent_activities=1),
        ):
            big = await client.start_workflow(
                Export, "big", 300, id="export-big", task_queue="flows", priority=Priority(5, fairness_key="big")
            )
            await UNDER_WAY.wait()  # the big export is under way
            small = await client.start_workflow(
                Export, "small", 5, id="export-small", task_queue="flows", priority=Priority(5, fairness_key="small")
            )
            await client.execute_workflow(RefundCheck, id="refund-check", task_queue="flows")
            await small.result(timeout=60)
            at = ORDER.index("URGENT")
            print(
                f"the refund check ran after {at} files, with {300 - ORDER[:at].count('big')} big files still waiting"
            )
            small_done = max(i for i, t in enumerate(ORDER) if t == "small")
            print(f"the small tenant's 5 files were done after {small_done} files in all")
            print(
                "order from the small tenant's start:", " ".join(t[0] for t in ORDER[ORDER.index("small") - 2 :][:16])
            )
            await big.result(timeout=120)
        await client.close()
    finally:
        engine.terminate()
        engine.wait(30)


if __name__ == "__main__":
    asyncio.run(main())
