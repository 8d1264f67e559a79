"""Hello, exception (Temporal: ``hello_exception``): an activity's failure reaches the workflow as
``ActivityError`` with the activity's error as its cause; a ``FailureError`` the workflow raises
fails the run, and the client gets ``WorkflowFailureError`` with the chain. (Any other exception
raised by workflow code is a bug: it fails the workflow task and the run waits for a fix.)"""

from __future__ import annotations

from datetime import timedelta

from kadence import (
    ActivityError,
    ApplicationError,
    Client,
    RetryPolicy,
    Worker,
    WorkflowFailureError,
    activity,
    workflow,
)

TASK_QUEUE = "hello-exception"


@activity.defn
async def charge(amount: int) -> str:
    raise ApplicationError("card declined", {"code": "DECLINED"}, type="CardDeclined", non_retryable=True)


@workflow.defn
class Checkout:
    @workflow.run
    async def run(self, amount: int) -> str:
        try:
            return await workflow.execute_activity(
                charge,
                amount,
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=RetryPolicy(maximum_attempts=2),
            )
        except ActivityError as err:
            raise ApplicationError(f"checkout failed: {err.__cause__}", type="CheckoutFailed") from err


async def main(client: Client) -> str:
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[Checkout], activities=[charge]):
        try:
            await client.execute_workflow(Checkout, 100, id="hello-exception", task_queue=TASK_QUEUE)
        except WorkflowFailureError as err:
            return f"{type(err).__name__}: {err.__cause__}"
    return "no failure"
