"""Tests of the payment saga sample (samples/payment_saga.py) with kadence.testing: no broker, no
Redis, about a second for all of them. Run them with

    pytest docs/examples/test_payment_saga.py

(pytest-asyncio in auto mode, as this project's pyproject.toml sets it; elsewhere mark each test
with @pytest.mark.asyncio)."""

import pytest

from kadence import WorkflowFailureError, activity
from kadence.samples import payment_saga as saga
from kadence.testing import WorkflowEnvironment

ORDER = {"order_id": "A-1", "sku": "book", "amount_cents": 2500}


@pytest.fixture(autouse=True)
def systems():
    """A fresh pretend outside world for each test."""
    saga.SYSTEMS.update(payment_failures=0, stock_available=True, effects={})
    yield saga.SYSTEMS


async def test_an_order_that_ships_within_two_weeks():
    async with WorkflowEnvironment(workflows=saga.WORKFLOWS, activities=saga.ACTIVITIES) as env:
        handle = await env.client.start_workflow(saga.OrderSaga, ORDER, id="order-A-1", task_queue=saga.TASK_QUEUE)
        await env.sleep(3 * 24 * 3600)  # three days later...
        assert await handle.query("status") == {"tracking": None}
        await handle.signal("shipped", "trk-1")
        assert await handle.result() == {"order_id": "A-1", "status": "shipped", "tracking": "trk-1"}


async def test_no_signal_in_fourteen_days_opens_a_support_case(systems):
    async with WorkflowEnvironment(workflows=saga.WORKFLOWS, activities=saga.ACTIVITIES) as env:
        # the 14-day wait is skipped: this test takes milliseconds
        result = await env.client.execute_workflow(saga.OrderSaga, ORDER, id="order-A-2", task_queue=saga.TASK_QUEUE)
    assert result == {"order_id": "A-1", "status": "support_case", "case": "case-A-1"}
    assert sorted(kind for kind, _value in systems["effects"].values()) == ["capture", "case", "reserve"]


async def test_payment_timeouts_are_retried_and_charge_once(systems):
    systems["payment_failures"] = 3
    async with WorkflowEnvironment(workflows=saga.WORKFLOWS, activities=saga.ACTIVITIES) as env:
        handle = await env.client.start_workflow(saga.OrderSaga, ORDER, 0.0, id="order-A-3", task_queue=saga.TASK_QUEUE)
        assert (await handle.result())["status"] == "support_case"
        failed = [e for e in await handle.history() if e["type"] == "ActivityTaskAttemptFailed"]
    assert len(failed) == 3
    assert [v for k, v in systems["effects"].values() if k == "capture"] == [2500]


async def test_no_stock_refunds_the_payment_and_fails_the_order(systems):
    systems["stock_available"] = False
    async with WorkflowEnvironment(workflows=saga.WORKFLOWS, activities=saga.ACTIVITIES) as env:
        with pytest.raises(WorkflowFailureError, match="no stock for book"):
            await env.client.execute_workflow(saga.OrderSaga, ORDER, id="order-A-4", task_queue=saga.TASK_QUEUE)
    assert sorted(kind for kind, _value in systems["effects"].values()) == ["capture", "refund"]


async def test_a_mock_replaces_an_activity_by_its_name():
    @activity.defn(name="capture_payment")
    async def declined(order: dict) -> str:
        raise ValueError(f"card declined for {order['order_id']}")

    activities = [declined, saga.reserve_stock, saga.refund_payment, saga.open_support_case]
    async with WorkflowEnvironment(workflows=saga.WORKFLOWS, activities=activities) as env:
        with pytest.raises(WorkflowFailureError, match="card declined for A-1"):
            await env.client.execute_workflow(saga.OrderSaga, ORDER, id="order-A-5", task_queue=saga.TASK_QUEUE)
