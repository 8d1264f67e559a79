"""Hello, retry (Temporal: ``hello_activity_retry``): the engine retries a failing activity with
backoff, by its retry policy; the workflow sees only the attempt that succeeded."""

from __future__ import annotations

from datetime import timedelta

from kadence import Client, RetryPolicy, Worker, activity, workflow

TASK_QUEUE = "hello-retry"


@activity.defn
async def flaky_greeting(name: str) -> str:
    attempt = activity.info().attempt
    if attempt < 4:
        raise RuntimeError(f"attempt {attempt} failed, on purpose")
    return f"Hello, {name}! (attempt {attempt})"


@workflow.defn
class RetryGreeting:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            flaky_greeting,
            name,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=50), backoff_coefficient=2.0),
        )


async def main(client: Client) -> str:
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[RetryGreeting], activities=[flaky_greeting]):
        return await client.execute_workflow(RetryGreeting, "World", id="hello-retry", task_queue=TASK_QUEUE)
