"""Typed payloads' shared workflow: a shop whose order (a dataclass) and receipt (a pydantic
model) cross activities, a signal and a query; and a counter for queries of closed runs."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pydantic

from kadence import ApplicationError, activity, workflow

T = timedelta(seconds=10)


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
    ref: uuid.UUID
    tier: Tier = Tier.SILVER
    note: str | None = None
    tags: dict[str, int] = field(default_factory=dict)


class Receipt(pydantic.BaseModel):
    order_id: str
    total: Decimal
    tier: Tier
    lines: int


def sample_order(**kw) -> Order:
    return Order(
        **{
            "id": "A-1",
            "lines": [Line("x", 2), Line("y", 1)],
            "placed": datetime(2026, 12, 2, 12, 0, tzinfo=UTC),
            "ref": uuid.UUID("12345678-1234-5678-1234-567812345678"),
            "tier": Tier.GOLD,
            **kw,
        }
    )


SEEN: list = []


@activity.defn
async def price(order: Order) -> Receipt:
    SEEN.append(type(order))
    assert isinstance(order.placed, datetime) and isinstance(order.lines[0], Line)
    total = sum(Decimal(line.qty) * Decimal("2.50") for line in order.lines)
    return Receipt(order_id=order.id, total=total, tier=order.tier, lines=len(order.lines))


@activity.defn
def stamp(receipt: Receipt, at: datetime) -> Line:  # sync: runs on a thread
    assert isinstance(receipt, Receipt) and isinstance(at, datetime)
    return Line(sku=f"receipt-{receipt.order_id}", qty=receipt.lines)


@workflow.defn
class Shop:
    def __init__(self) -> None:
        self.coupons: list[Line] = []

    @workflow.signal
    def coupon(self, line: Line) -> None:
        assert isinstance(line, Line)
        self.coupons.append(line)

    @workflow.query
    def coupons_for(self, tier: Tier) -> list[Line]:
        assert isinstance(tier, Tier)
        return list(self.coupons)

    @workflow.run
    async def run(self, order: Order) -> Receipt:
        assert isinstance(order, Order) and isinstance(order.ref, uuid.UUID)
        receipt = await workflow.execute_activity(price, order, start_to_close_timeout=T)
        assert isinstance(receipt, Receipt)
        line = await workflow.execute_activity(stamp, receipt, order.placed, start_to_close_timeout=T)
        assert isinstance(line, Line)
        await workflow.wait_condition(lambda: bool(self.coupons))
        return receipt.model_copy(update={"lines": receipt.lines + len(self.coupons)})


@workflow.defn
class Counter:
    def __init__(self) -> None:
        self.count = 0

    @workflow.signal
    def bump(self, by: int) -> None:
        self.count += by

    @workflow.query
    def value(self) -> int:
        return self.count

    @workflow.run
    async def run(self, until: int) -> int:
        await workflow.wait_condition(lambda: self.count >= until)
        if self.count > until:
            raise ApplicationError("overshot", type="Overshot")
        return self.count
