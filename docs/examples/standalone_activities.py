"""Standalone activities: an activity started by its own ID, with no workflow around it, retried
by the engine, with one result for every caller.

Run it with the project's dev stack (starts Kafka, runs this, stops Kafka):

    python3 scripts/devstack.py run -- .venv/bin/python docs/examples/standalone_activities.py

It starts a history processor and a timer service (child processes) and a worker, then starts
the activity ``send-receipt-1001``, which fails its first two attempts; two callers wait for its
result and get the same one. A second start with the same ID meets the open or closed activity
and follows the ID policies; a cancel reaches a running activity at its next heartbeat.
"""

import asyncio
import os
import subprocess
import sys
import uuid
from datetime import timedelta

from kadence import ActivityAlreadyStartedError, ActivityFailedError, Client, RetryPolicy, Worker, activity
from kadence.topics import Catalogue, KafkaConfig

FAST = RetryPolicy(initial_interval=timedelta(milliseconds=200))


@activity.defn
async def send_receipt(order: str, email: str) -> str:
    attempt = activity.info().attempt
    if attempt < 3:
        raise ConnectionError(f"mail server busy (attempt {attempt})")
    return f"receipt for {order} sent to {email} by attempt {attempt}"


@activity.defn
async def export_report(name: str) -> str:
    while True:  # a long export that heartbeats: a cancel reaches it at its next heartbeat
        activity.heartbeat("exporting")
        await asyncio.sleep(0.2)


async def main() -> None:
    config = KafkaConfig.from_env(namespace=f"standalone{uuid.uuid4().hex[:6]}")
    Catalogue(config).apply()
    env = {**os.environ, "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap, "KADENCE_NAMESPACE": config.namespace}
    engine = [
        subprocess.Popen([sys.executable, "-m", "kadence.cli", "--log-level", "warning", *args], env=env)
        for args in (["processor", "--instance-id", "standalone"], ["timers"])  # (retry backoffs are timers)
    ]
    try:
        client = await Client.connect(config=config)
        async with Worker(client, task_queue="mail", activities=[send_receipt, export_report]):
            handle = await client.start_activity(
                send_receipt,
                "order-1001",
                "ann@example.com",
                id="send-receipt-1001",
                task_queue="mail",
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=FAST,
            )
            other = client.get_activity_handle("send-receipt-1001")  # e.g. in another service
            first, second = await asyncio.gather(handle.result(), other.result())
            print("result:", first)
            print("same for both callers:", first == second)
            try:  # the ID's last run completed: reject_duplicate refuses a new one
                await client.start_activity(
                    send_receipt, "order-1001", "ann@example.com", id="send-receipt-1001", task_queue="mail",
                    start_to_close_timeout=timedelta(seconds=10), id_reuse_policy="reject_duplicate",
                )  # fmt: skip
            except ActivityAlreadyStartedError as exc:
                print("second start refused:", exc.engine_message)

            export = await client.start_activity(
                export_report, "q3", id="export-q3", task_queue="mail",
                start_to_close_timeout=timedelta(minutes=10), heartbeat_timeout=timedelta(seconds=5),
            )  # fmt: skip
            same = await client.start_activity(
                export_report, "q3", id="export-q3", task_queue="mail",
                start_to_close_timeout=timedelta(minutes=10), id_conflict_policy="use_existing",
            )  # fmt: skip
            print("use_existing gives the open run:", same.run_id == export.run_id)
            print("status:", (await export.describe()).status.value)
            await export.cancel(reason="no longer needed")
            try:
                await export.result()
            except ActivityFailedError as exc:
                print("export ended:", exc.status)
        await client.close()
    finally:
        for proc in engine:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    asyncio.run(main())
