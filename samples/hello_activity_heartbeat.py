"""Hello, heartbeat (Temporal: ``hello_activity_heartbeat``): a long activity reports progress; a
retried attempt resumes from the last details it reported, and the heartbeat timeout catches a
worker that went silent."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kadence import Client, RetryPolicy, Worker, activity, workflow

TASK_QUEUE = "hello-heartbeat"


@activity.defn
async def count_rows(total: int) -> dict[str, Any]:
    details = activity.info().heartbeat_details  # progress an earlier attempt reported (or None)
    start = details if isinstance(details, int) else 0
    for row in range(start, total):
        activity.heartbeat(row + 1)  # throttled: at most one send per half heartbeat timeout
        if activity.info().attempt == 1 and row == total // 2:
            raise ConnectionError("the database blinked")  # the retry resumes from the progress sent
    return {"attempt": activity.info().attempt, "resumed": start > 0}


@workflow.defn
class CountRows:
    @workflow.run
    async def run(self, total: int) -> dict[str, Any]:
        return await workflow.execute_activity(
            count_rows,
            total,
            start_to_close_timeout=timedelta(seconds=30),
            heartbeat_timeout=timedelta(seconds=5),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100)),
        )


async def main(client: Client) -> dict[str, Any]:
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[CountRows], activities=[count_rows]):
        return await client.execute_workflow(CountRows, 10, id="hello-heartbeat", task_queue=TASK_QUEUE)
