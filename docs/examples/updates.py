"""Updates: a validated request into a running workflow that returns the handler's result. It
runs on ``kadence.testing``'s in-process engine, so it needs no broker:

    .venv/bin/python docs/examples/updates.py

The same code runs unchanged with ``Client.connect`` and a ``Worker`` against Kafka.
"""

import asyncio
from dataclasses import dataclass
from datetime import timedelta

from kadence import ApplicationError, WorkflowUpdateFailedError, activity, workflow
from kadence.testing import WorkflowEnvironment


@dataclass
class Item:
    sku: str
    qty: int


@activity.defn
async def reserve(item: Item) -> str:
    return f"reserved {item.qty} x {item.sku}"


@workflow.defn
class Cart:
    def __init__(self) -> None:
        self.items: list[Item] = []
        self.checked_out = False

    @workflow.update
    async def add(self, item: Item) -> int:
        await workflow.execute_activity(reserve, item, start_to_close_timeout=timedelta(seconds=30))
        self.items.append(item)
        return len(self.items)

    @add.validator
    def _check_add(self, item: Item) -> None:
        if item.qty < 1:
            raise ValueError(f"quantity must be positive, got {item.qty}")
        if self.checked_out:
            raise ApplicationError("the cart is checked out", type="CartClosed")

    @workflow.signal
    def checkout(self) -> None:
        self.checked_out = True

    @workflow.run
    async def run(self, customer: str) -> dict:
        await workflow.wait_condition(lambda: self.checked_out)
        return {"customer": customer, "items": [i.sku for i in self.items]}


async def main() -> None:
    async with WorkflowEnvironment(workflows=[Cart], activities=[reserve]) as env:
        handle = await env.client.start_workflow(Cart, "ann", id="cart-ann", task_queue="carts")
        print("items:", await handle.execute_update(Cart.add, Item("cup", 2), request_id="ann-cup"))
        print("again:", await handle.execute_update(Cart.add, Item("cup", 2), request_id="ann-cup"))
        try:
            await handle.execute_update(Cart.add, Item("mug", 0))
        except WorkflowUpdateFailedError as exc:
            print(f"rejected: {exc.rejected}, {exc.__cause__}")
        await handle.signal("checkout")
        print("result:", await handle.result())
        recorded = [e["type"] for e in await handle.history() if e["type"].startswith("WorkflowUpdate")]
        print("in history:", recorded)


if __name__ == "__main__":
    asyncio.run(main())
