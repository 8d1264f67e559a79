"""The seed's order saga: payment with retries, stock with compensation, a long wait for shipping.

1. capture the payment (transient failures are retried by the engine with backoff);
2. reserve the stock; if that fails: refund the payment, then fail the workflow;
3. wait up to 14 days (``ship_wait_seconds``) for a ``shipped`` signal;
4. if none came, open a support case.

Activities here talk to pretend systems through ``SYSTEMS`` so tests can make them fail; each
passes its idempotency key, the way a real integration would.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kadence import ActivityError, ApplicationError, RetryPolicy, activity, workflow

TASK_QUEUE = "saga"
FOURTEEN_DAYS = 14 * 24 * 3600

#: the pretend outside world: failures to inject, and a log of effects keyed by idempotency key
SYSTEMS: dict[str, Any] = {"payment_failures": 0, "stock_available": True, "effects": {}}


def _effect(kind: str, value: object) -> None:
    SYSTEMS["effects"].setdefault(activity.info().idempotency_key, (kind, value))


@activity.defn
async def capture_payment(order: dict[str, Any]) -> str:
    if SYSTEMS["payment_failures"] > 0:
        SYSTEMS["payment_failures"] -= 1
        raise ConnectionError("payment provider timed out")
    _effect("capture", order["amount_cents"])
    return f"pay-{order['order_id']}"


@activity.defn
async def reserve_stock(order: dict[str, Any]) -> str:
    if not SYSTEMS["stock_available"]:
        raise ApplicationError(f"no stock for {order['sku']}", non_retryable=True, type="OutOfStock")
    _effect("reserve", order["sku"])
    return f"res-{order['order_id']}"


@activity.defn
async def refund_payment(payment_id: str) -> str:
    _effect("refund", payment_id)
    return f"refund-{payment_id}"


@activity.defn
async def open_support_case(order: dict[str, Any]) -> str:
    _effect("case", order["order_id"])
    return f"case-{order['order_id']}"


@workflow.defn
class OrderSaga:
    def __init__(self) -> None:
        self.tracking: str | None = None

    @workflow.signal
    def shipped(self, tracking: str) -> None:
        self.tracking = tracking

    @workflow.query
    def status(self) -> dict[str, Any]:
        return {"tracking": self.tracking}

    @workflow.run
    async def run(self, order: dict[str, Any], ship_wait_seconds: float = FOURTEEN_DAYS) -> dict[str, Any]:
        quick = timedelta(seconds=30)
        payment = await workflow.execute_activity(
            capture_payment,
            order,
            start_to_close_timeout=quick,
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5),
        )
        try:
            await workflow.execute_activity(reserve_stock, order, start_to_close_timeout=quick)
        except ActivityError:
            await workflow.execute_activity(refund_payment, payment, start_to_close_timeout=quick)
            raise
        try:
            await workflow.wait_condition(lambda: self.tracking is not None, timeout=ship_wait_seconds)
        except TimeoutError:
            case = await workflow.execute_activity(open_support_case, order, start_to_close_timeout=quick)
            return {"order_id": order["order_id"], "status": "support_case", "case": case}
        return {"order_id": order["order_id"], "status": "shipped", "tracking": self.tracking}


WORKFLOWS = [OrderSaga]
ACTIVITIES = [capture_payment, reserve_stock, refund_payment, open_support_case]
