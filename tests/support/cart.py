"""Updates' shared workflow: a cart whose items are added through a validated update that runs
an activity, removed through another, and checked out by a signal."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from kadence import ApplicationError, activity, workflow

T = timedelta(seconds=10)


@dataclass
class Item:
    sku: str
    qty: int


@activity.defn
async def price(sku: str) -> int:
    return 100 * len(sku)


@workflow.defn
class Cart:
    def __init__(self) -> None:
        self.items: list[Item] = []
        self.total = 0
        self.checked_out = False
        self.locked = False

    @workflow.update
    async def add(self, item: Item) -> int:
        cents = await workflow.execute_activity(price, item.sku, start_to_close_timeout=T)
        self.items.append(item)
        self.total += cents * item.qty
        return self.total

    @add.validator
    def _check_add(self, item: Item) -> None:
        if item.qty < 1:
            raise ValueError(f"quantity must be positive, got {item.qty}")
        if self.locked:
            raise ApplicationError("the cart is locked", type="CartLocked")

    @workflow.update
    def remove(self, sku: str) -> list[str]:
        if not any(i.sku == sku for i in self.items):
            raise ApplicationError(f"no {sku} in the cart", type="NotInCart")
        self.items = [i for i in self.items if i.sku != sku]
        return [i.sku for i in self.items]

    @workflow.update
    async def slow(self) -> str:
        await workflow.sleep(timedelta(days=1))
        return "late"

    @workflow.signal
    def checkout(self) -> None:
        self.checked_out = True

    @workflow.signal
    def lock(self) -> None:
        self.locked = True

    @workflow.query
    def count(self) -> int:
        return len(self.items)

    @workflow.run
    async def run(self, customer: str) -> dict:
        await workflow.wait_condition(lambda: self.checked_out)
        return {"customer": customer, "items": [i.sku for i in self.items], "total": self.total}
