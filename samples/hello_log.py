"""Hello, loggers (Temporal: ``hello_log``): ``workflow.logger`` and ``activity.logger`` are standard
logging adapters that name the run (and the activity and its attempt); the workflow's lines are
written once, not again when the workflow replays its history."""

from __future__ import annotations

import logging
from datetime import timedelta

from kadence import Client, Worker, activity, workflow

TASK_QUEUE = "hello-log"


@activity.defn
async def work(name: str) -> str:
    activity.logger.info("working for %s", name)
    return name


@workflow.defn
class Logged:
    @workflow.run
    async def run(self, name: str) -> str:
        workflow.logger.info("starting for %s", name)
        done = await workflow.execute_activity(work, name, start_to_close_timeout=timedelta(seconds=10))
        workflow.logger.info("done for %s", done)
        return done


async def main(client: Client) -> str:
    logging.getLogger("kadence.workflow").setLevel(logging.INFO)
    logging.getLogger("kadence.activity").setLevel(logging.INFO)
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[Logged], activities=[work]):
        return await client.execute_workflow(Logged, "log", id="hello-log", task_queue=TASK_QUEUE)
