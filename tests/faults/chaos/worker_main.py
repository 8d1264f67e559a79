"""A chaos worker process: ``python -m tests.faults.chaos.worker_main`` (run from the repo root).

Serves the chaos workflows and activities on the chaos task queue, and the schedules on theirs,
until SIGTERM; the fault
injector SIGKILLs it. Reads KADENCE_KAFKA_BOOTSTRAP, KADENCE_NAMESPACE, KADENCE_REDIS_URL,
KADENCE_CHAOS_PREFIX and KADENCE_WORKER_SESSION_TIMEOUT_MS.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import math
import os
import signal

from kadence import Client, KafkaConfig, Worker
from kadence.operations import Schedule, schedule_activities
from kadence.topics.schedules import SCHEDULES_TASK_QUEUE

from .workflows import ACTIVITIES, TASK_QUEUE, WORKFLOWS


async def main() -> None:
    # as `kadence worker` does: a worker restarted while the broker is down waits for it
    client = await Client.connect(config=KafkaConfig.from_env(), wait_for_broker=math.inf)
    worker = Worker(
        client,
        task_queue=TASK_QUEUE,
        workflows=WORKFLOWS,
        activities=ACTIVITIES,
        session_timeout_ms=int(os.environ.get("KADENCE_WORKER_SESSION_TIMEOUT_MS", "6000")),
        identity=os.environ.get("KADENCE_WORKER_ID"),
    )
    # and the schedules (what `kadence schedules worker` runs)
    schedules = Worker(
        client,
        task_queue=SCHEDULES_TASK_QUEUE,
        workflows=[Schedule],
        activities=schedule_activities(client),
        session_timeout_ms=int(os.environ.get("KADENCE_WORKER_SESSION_TIMEOUT_MS", "6000")),
        identity=os.environ.get("KADENCE_WORKER_ID"),
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: (worker.shutdown(), schedules.shutdown()))
    try:
        await asyncio.gather(worker.run(), schedules.run())
    finally:
        await client.close()


if __name__ == "__main__":
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1` dumps every thread's stack into the log
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(main())
