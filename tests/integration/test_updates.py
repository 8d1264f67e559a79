"""Workflow updates on the real broker, through the SDK and the gateway: the handler's result
comes back; a rejection writes nothing; a retried request (same ID, also while the update is
still running) is recorded once and gets the same result; update-with-start starts the run."""

from __future__ import annotations

import uuid

import httpx
import pytest

from kadence import BrokerUnavailableError, Worker, WorkflowUpdateFailedError, workflow
from kadence.gateway import GatewayConfig, create_app
from tests.support.cart import Cart, Item, price

from .gateway_support import serve


@workflow.defn
class Gate:
    def __init__(self) -> None:
        self.open = False
        self.done = False

    @workflow.update
    async def wait_open(self, who: str) -> str:
        await workflow.wait_condition(lambda: self.open)
        return f"{who} went through"

    @workflow.signal
    def unlock(self) -> None:
        self.open = True

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.done)
        return "closed"


def _types(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


async def test_updates_through_the_sdk(client, processors):
    processors.start()
    async with Worker(client, task_queue="upd", workflows=[Cart, Gate], activities=[price]):
        cart = await client.start_workflow(Cart, "ann", id="cart-upd-1", task_queue="upd")
        assert await cart.execute_update(Cart.add, Item("cup", 2), request_id="cup-1", timeout=60) == 600
        assert await cart.execute_update(Cart.add, Item("cup", 2), request_id="cup-1", timeout=60) == 600
        with pytest.raises(WorkflowUpdateFailedError, match="rejected: ValueError: quantity must be positive"):
            await cart.execute_update(Cart.add, Item("mug", 0), timeout=60)
        with pytest.raises(WorkflowUpdateFailedError, match="failed: NotInCart") as info:
            await cart.execute_update(Cart.remove, "tea", timeout=60)
        assert info.value.__cause__.type == "NotInCart"
        await cart.signal("checkout")
        assert (await cart.result(timeout=60))["total"] == 600
        types = _types(await cart.history())
        assert types.count("WorkflowUpdateAccepted") == 2 and types.count("WorkflowUpdateCompleted") == 2

        # an update still running when its caller gives up: the retry (same ID) gets its result
        gate = await client.start_workflow(Gate, id="gate-upd-1", task_queue="upd")
        with pytest.raises(BrokerUnavailableError):
            await gate.execute_update(Gate.wait_open, "ann", request_id="ann-1", timeout=3)
        await gate.signal("unlock")
        assert await gate.execute_update(Gate.wait_open, "ann", request_id="ann-1", timeout=60) == "ann went through"
        await gate.signal("finish")
        assert await gate.result(timeout=60) == "closed"
        types = _types(await gate.history())
        assert types.count("WorkflowUpdateAccepted") == 1 and types.count("WorkflowUpdateCompleted") == 1

        # update-with-start
        total = await client.execute_update_with_start(
            Cart, "bob", id="cart-upd-2", task_queue="upd", update=Cart.add, update_args=(Item("pen", 1),), timeout=60
        )
        assert total == 300


async def test_updates_through_the_gateway(client, processors, kafka_config):
    processors.start()
    app = create_app(GatewayConfig(kafka=kafka_config, auth=False, reply_timeout=30.0))
    async with Worker(client, task_queue="upd-gw", workflows=[Cart], activities=[price]):
        with serve(app) as url:
            async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                key = str(uuid.uuid4())
                # update-with-start: no run yet
                body = {
                    "input": [{"sku": "cup", "qty": 1}],
                    "workflow_type": "Cart",
                    "task_queue": "upd-gw",
                    "start_input": ["cy"],
                }
                first = await http.post(
                    "/v1/workflows/cart-gw-1/updates/add", json=body, headers={"Idempotency-Key": key}
                )
                assert first.status_code == 200, first.text
                assert first.json()["result"] == 300
                again = await http.post(
                    "/v1/workflows/cart-gw-1/updates/add", json=body, headers={"Idempotency-Key": key}
                )
                assert again.status_code == 200 and again.json() == first.json()
                rejected = await http.post(
                    "/v1/workflows/cart-gw-1/updates/add", json={"input": [{"sku": "cup", "qty": -1}]}
                )
                assert rejected.status_code == 409, rejected.text
                error = rejected.json()["error"]
                assert error["code"] == "update_rejected" and error["failure"]["type"] == "ValueError"
                failed = await http.post("/v1/workflows/cart-gw-1/updates/remove", json={"input": ["tea"]})
                assert failed.status_code == 409 and failed.json()["error"]["code"] == "update_failed"
                missing = await http.post("/v1/workflows/no-such-cart/updates/add", json={"input": []})
                assert missing.status_code == 404
    events = await client.get_workflow_handle("cart-gw-1").history()
    types = _types(events)
    assert types.count("WorkflowExecutionStarted") == 1
    assert types.count("WorkflowUpdateAccepted") == 2  # the add (once, though sent twice) and the remove
