"""The bundled sample: order fulfilment with four activities.

Reserve the stock, charge the payment, ship, then send a confirmation. Each activity passes its
idempotency key to the (pretend) external system, so a retried attempt has its effect once.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kadence import activity, workflow

TASK_QUEUE = "orders"


@activity.defn
async def reserve_stock(order: dict[str, Any]) -> dict[str, Any]:
    items = sum(int(line["qty"]) for line in order["lines"])
    return {"reservation": f"res-{activity.info().idempotency_key}", "items": items}


@activity.defn
async def charge_payment(order: dict[str, Any], amount_cents: int) -> dict[str, Any]:
    return {"charge": f"ch-{activity.info().idempotency_key}", "amount_cents": amount_cents}


@activity.defn
def ship_order(order: dict[str, Any], reservation: str) -> dict[str, Any]:  # a sync activity runs in a thread
    return {"tracking": f"trk-{order['order_id']}", "reservation": reservation}


@activity.defn
async def send_confirmation(order: dict[str, Any], tracking: str) -> str:
    return f"mail to {order['customer']}: order {order['order_id']} shipped, tracking {tracking}"


@workflow.defn
class OrderFulfilment:
    @workflow.run
    async def run(self, order: dict[str, Any]) -> dict[str, Any]:
        timeout = timedelta(seconds=30)
        stock = await workflow.execute_activity(reserve_stock, order, start_to_close_timeout=timeout)
        amount = sum(int(line["qty"]) * int(line["price_cents"]) for line in order["lines"])
        charge = await workflow.execute_activity(charge_payment, order, amount, start_to_close_timeout=timeout)
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
        }


WORKFLOWS = [OrderFulfilment]
ACTIVITIES = [reserve_stock, charge_payment, ship_order, send_confirmation]

SAMPLE_ORDER = {
    "order_id": "A-1001",
    "customer": "ada@example.com",
    "lines": [{"sku": "KAF-1", "qty": 2, "price_cents": 1250}, {"sku": "PY-3", "qty": 1, "price_cents": 4000}],
}
