"""Build v2 of the order-fulfilment sample: the stock reservation and the payment run at once.

The change is not replay-safe (v2 schedules two activities where v1's history has one): runs
started on v1 must finish on v1. Deploy v2 beside v1 as another build and promote it
(docs/upgrading.md): new orders start on v2, open v1 orders finish on v1, and v1's workers stop
when none is left. Both builds call the same activities (activities are shared by every build
of a task queue).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from kadence import workflow

from .order_fulfilment import (
    ACTIVITIES,
    SAMPLE_ORDER,
    TASK_QUEUE,
    charge_payment,
    reserve_stock,
    send_confirmation,
    ship_order,
)

__all__ = ["ACTIVITIES", "SAMPLE_ORDER", "TASK_QUEUE", "WORKFLOWS", "OrderFulfilment"]


@workflow.defn
class OrderFulfilment:
    @workflow.run
    async def run(self, order: dict[str, Any]) -> dict[str, Any]:
        timeout = timedelta(seconds=30)
        amount = sum(int(line["qty"]) * int(line["price_cents"]) for line in order["lines"])
        stock, charge = await asyncio.gather(
            workflow.execute_activity(reserve_stock, order, start_to_close_timeout=timeout),
            workflow.execute_activity(charge_payment, order, amount, start_to_close_timeout=timeout),
        )
        shipment = await workflow.execute_activity(
            ship_order, order, stock["reservation"], start_to_close_timeout=timeout
        )
        note = await workflow.execute_activity(
            send_confirmation, order, shipment["tracking"], start_to_close_timeout=timeout
        )
        return {
            "order_id": order["order_id"],
            "charged_cents": charge["amount_cents"],
            "items": stock["items"],
            "tracking": shipment["tracking"],
            "confirmation": note,
            "build": "v2",
        }


WORKFLOWS = [OrderFulfilment]
