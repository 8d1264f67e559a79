"""Hello, choice (Temporal: ``hello_activity_choice``): the workflow picks an activity by plain
Python branching; replay takes the same branch because the input is recorded."""

from __future__ import annotations

from datetime import timedelta
from enum import Enum

from kadence import Client, Worker, activity, workflow

TASK_QUEUE = "hello-choice"


class Fruit(Enum):
    APPLE = "apple"
    BANANA = "banana"


@activity.defn
async def order_apples(amount: int) -> str:
    return f"ordered {amount} apples"


@activity.defn
async def order_bananas(amount: int) -> str:
    return f"ordered {amount} bananas"


@workflow.defn
class PurchaseFruits:
    @workflow.run
    async def run(self, basket: list[tuple[Fruit, int]]) -> list[str]:
        done = []
        for fruit, amount in basket:
            chosen = order_apples if fruit is Fruit.APPLE else order_bananas
            done.append(await workflow.execute_activity(chosen, amount, start_to_close_timeout=timedelta(seconds=10)))
        return done


async def main(client: Client) -> list[str]:
    async with Worker(
        client, task_queue=TASK_QUEUE, workflows=[PurchaseFruits], activities=[order_apples, order_bananas]
    ):
        return await client.execute_workflow(
            PurchaseFruits, [(Fruit.APPLE, 3), (Fruit.BANANA, 2)], id="hello-choice", task_queue=TASK_QUEUE
        )
