"""Typed payloads: a dataclass in, a pydantic model out, typed through activities, a signal and a
query. It runs on ``kadence.testing``'s in-process engine, so it needs no broker:

    .venv/bin/python docs/examples/typed_payloads.py

The same code runs unchanged with ``Client.connect`` and a ``Worker`` against Kafka.
"""

import asyncio
import enum
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pydantic

from kadence import PayloadTypeError, activity, workflow
from kadence.testing import WorkflowEnvironment


class Tier(enum.Enum):
    GOLD = "gold"
    SILVER = "silver"


@dataclass
class Line:
    sku: str
    qty: int


@dataclass
class Order:
    id: str
    lines: list[Line]
    placed: datetime
    tier: Tier = Tier.SILVER


class Receipt(pydantic.BaseModel):
    order_id: str
    total: Decimal
    items: int


@activity.defn
async def price(order: Order) -> Receipt:  # gets an Order, not a dict
    total = sum(Decimal("2.50") * line.qty for line in order.lines)
    return Receipt(order_id=order.id, total=total, items=len(order.lines))


@workflow.defn
class Checkout:
    def __init__(self) -> None:
        self.extra: list[Line] = []

    @workflow.signal
    def add(self, line: Line) -> None:
        self.extra.append(line)

    @workflow.query
    def pending(self) -> list[Line]:
        return self.extra

    @workflow.run
    async def run(self, order: Order) -> Receipt:
        await workflow.wait_condition(lambda: bool(self.extra))
        order.lines += self.extra
        return await workflow.execute_activity(price, order, start_to_close_timeout=timedelta(seconds=10))


async def main() -> None:
    async with WorkflowEnvironment(workflows=[Checkout], activities=[price]) as env:
        order = Order("A-1", [Line("tea", 2)], datetime(2026, 12, 2, tzinfo=UTC), Tier.GOLD)
        handle = await env.client.start_workflow(Checkout, order, id="checkout-A-1", task_queue="shop")
        await handle.signal("add", Line("cup", 1))
        print("pending:", await handle.query(Checkout.pending))  # typed by the query's return type
        receipt = await handle.result(timeout=10)  # typed by the run method's
        print("receipt:", repr(receipt))
        try:  # input that cannot become an Order is refused before anything is sent
            await env.client.start_workflow(
                Checkout, {"id": "B", "lines": [], "placed": "soon"}, id="checkout-B", task_queue="shop"
            )
        except PayloadTypeError as exc:
            print("refused:", exc)


if __name__ == "__main__":
    asyncio.run(main())
