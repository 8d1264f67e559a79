"""The SDK on the real broker: typed payloads (a dataclass in, a pydantic model out, through
activities, a signal and a query; what the history holds is plain JSON another service can read)
and queries of closed runs (answered from their final state)."""

import json
from decimal import Decimal

import pytest

from kadence import Worker, WorkflowFailureError
from tests.support.shop import Counter, Line, Receipt, Shop, Tier, price, sample_order, stamp

from .invariants import histories


async def test_typed_values_cross_the_engine_and_the_history_holds_json(client, processors, kafka_config):
    processors.start()
    order = sample_order(id="T-1")
    async with Worker(client, task_queue="typed", workflows=[Shop], activities=[price, stamp]):
        handle = await client.start_workflow(Shop, order, id="typed-1", task_queue="typed")
        # the handler asserts it got a Tier (the query's argument, typed on the worker)
        assert await handle.query(Shop.coupons_for, Tier.GOLD) == []
        await handle.signal("coupon", Line("c", 1))
        receipt = await handle.result(timeout=60)
        assert receipt == Receipt(order_id="T-1", total=Decimal("7.50"), tier=Tier.GOLD, lines=3)
    events = histories(kafka_config)[("typed-1", handle.run_id)]
    started = next(e["attributes"][1] for e in events if e["attributes"][0] == "WorkflowExecutionStarted")
    assert json.loads(started["input"]) == [
        {
            "id": "T-1",
            "lines": [{"sku": "x", "qty": 2}, {"sku": "y", "qty": 1}],
            "placed": "2026-12-02T12:00:00Z",
            "ref": "12345678-1234-5678-1234-567812345678",
            "tier": "gold",
            "note": None,
            "tags": {},
        }
    ]
    done = next(e["attributes"][1] for e in events if e["attributes"][0] == "WorkflowExecutionCompleted")
    assert json.loads(done["result"]) == {"order_id": "T-1", "total": "7.50", "tier": "gold", "lines": 3}


async def test_closed_runs_answer_queries_from_their_final_state(client, processors):
    processors.start()
    async with Worker(client, task_queue="counting", workflows=[Counter]):
        done = await client.start_workflow(Counter, 2, id="closed-q-1", task_queue="counting")
        await done.signal("bump", 2)
        assert await done.result(timeout=60) == 2
        assert await done.query(Counter.value) == 2
        failed = await client.start_workflow(Counter, 2, id="closed-q-2", task_queue="counting")
        await failed.signal("bump", 7)
        with pytest.raises(WorkflowFailureError):
            await failed.result(timeout=60)
        assert await failed.query("value") == 7
