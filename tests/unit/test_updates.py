"""Workflow updates on ``kadence.testing`` (the real state machine, no broker): the handler's
result comes back; a validator's rejection writes nothing to history; a handler's exception is
the caller's error and the run goes on; a retried request (same ID) is recorded once and answered
with the same result, also after the run closed; an update still running when the run closes
fails; update-with-start starts the run; replay of a history with updates is deterministic."""

from __future__ import annotations

import asyncio

import pytest

from kadence import (
    ApplicationError,
    PayloadTypeError,
    Replayer,
    WorkflowNotFoundError,
    WorkflowUpdateFailedError,
    workflow,
)
from kadence.testing import WorkflowEnvironment
from tests.support.cart import Cart, Item, price
from tests.unit.docs_examples import run_example


def _types(history: list[dict]) -> list[str]:
    return [e["type"] for e in history]


async def test_an_update_returns_its_handlers_result_and_is_recorded_once():
    async with WorkflowEnvironment(workflows=[Cart], activities=[price]) as env:
        handle = await env.client.start_workflow(Cart, "ann", id="cart-1", task_queue="q")
        assert await handle.execute_update(Cart.add, Item("cup", 2), request_id="u-1") == 600
        assert await handle.execute_update("add", Item("mug", 1)) == 900
        # the same request again: the first result, nothing recorded again
        assert await handle.execute_update(Cart.add, Item("cup", 2), request_id="u-1") == 600
        assert await handle.query(Cart.count) == 2
        await handle.signal("checkout")
        assert await handle.result() == {"customer": "ann", "items": ["cup", "mug"], "total": 900}
        # after the run closed, the retried request is still answered from its record
        assert await handle.execute_update(Cart.add, Item("cup", 2), request_id="u-1") == 600
        history = await handle.history()
        raw = await handle.history(raw=True)
    types = _types(history)
    assert types.count("WorkflowUpdateAccepted") == 2 and types.count("WorkflowUpdateCompleted") == 2
    accepted = [e for e in history if e["type"] == "WorkflowUpdateAccepted"]
    assert accepted[0]["request_id"] == "u-1" and accepted[0]["attributes"]["input"] == [{"sku": "cup", "qty": 2}]
    # the history replays without a non-determinism error
    assert Replayer(workflows=[Cart]).replay(raw).ok


async def test_a_rejected_update_writes_nothing_and_says_why():
    async with WorkflowEnvironment(workflows=[Cart], activities=[price]) as env:
        handle = await env.client.start_workflow(Cart, "bob", id="cart-2", task_queue="q")
        before = _types(await handle.history())
        with pytest.raises(WorkflowUpdateFailedError, match="rejected: ValueError: quantity must be positive") as info:
            await handle.execute_update(Cart.add, Item("cup", 0))
        assert info.value.rejected and info.value.update_name == "add"
        with pytest.raises(WorkflowUpdateFailedError, match="has no update 'nope'") as info:
            await handle.execute_update("nope")
        assert info.value.rejected and info.value.failure["type"] == "UnknownUpdate"
        # arguments that do not match the handler's types: refused before sending (typed error) ...
        with pytest.raises(PayloadTypeError):
            await handle.execute_update(Cart.add, {"sku": "cup"})
        # ... and by the worker when sent by name
        with pytest.raises(WorkflowUpdateFailedError, match="rejected: PayloadTypeError"):
            await handle.execute_update("add", {"sku": "cup"})
        await handle.signal("lock")
        with pytest.raises(WorkflowUpdateFailedError, match="the cart is locked") as info:
            await handle.execute_update(Cart.add, Item("cup", 1))
        assert isinstance(info.value.__cause__, ApplicationError) and info.value.__cause__.type == "CartLocked"
        await handle.signal("checkout")
        await handle.result()
        with pytest.raises(WorkflowUpdateFailedError, match="rejected: workflow is completed") as info:
            await handle.execute_update(Cart.remove, "cup")
        assert info.value.rejected and info.value.failure is None
        after = _types(await handle.history())
    assert "WorkflowUpdateAccepted" not in after and after[: len(before)] == before


async def test_a_handlers_exception_fails_the_update_not_the_run():
    async with WorkflowEnvironment(workflows=[Cart], activities=[price]) as env:
        handle = await env.client.start_workflow(Cart, "cy", id="cart-3", task_queue="q")
        with pytest.raises(WorkflowUpdateFailedError, match="failed: NotInCart: no tea in the cart") as info:
            await handle.execute_update(Cart.remove, "tea")
        assert not info.value.rejected and info.value.__cause__.type == "NotInCart"
        await handle.execute_update(Cart.add, Item("tea", 1))
        assert await handle.execute_update(Cart.remove, "tea") == []
        await handle.signal("checkout")
        assert (await handle.result())["items"] == []


async def test_an_update_running_when_the_run_closes_fails():
    async with WorkflowEnvironment(workflows=[Cart], activities=[price]) as env:
        handle = await env.client.start_workflow(Cart, "di", id="cart-4", task_queue="q")
        slow = asyncio.ensure_future(handle.execute_update(Cart.slow, request_id="slow-1"))

        async def accepted():
            while "WorkflowUpdateAccepted" not in _types(await handle.history()):
                await asyncio.sleep(0.01)

        await asyncio.wait_for(accepted(), 10)  # and its handler waits on its timer
        await handle.signal("checkout")
        await handle.result()
        with pytest.raises(WorkflowUpdateFailedError, match="closed .completed. before the update 'slow' finished"):
            await slow
        with pytest.raises(WorkflowUpdateFailedError, match="before the update 'slow' finished"):
            await handle.execute_update(Cart.slow, request_id="slow-1")  # the same answer again


@workflow.defn
class Race:
    def __init__(self) -> None:
        self.go = False
        self.closing = False

    @workflow.update
    async def last_word(self) -> str:
        self.go = True
        await workflow.wait_condition(lambda: self.closing)  # resumes after the run returned
        return "too late"

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.go)
        self.closing = True
        return "closed"


async def test_an_update_that_finishes_after_the_run_returned_fails_and_the_history_replays():
    async with WorkflowEnvironment(workflows=[Race]) as env:
        handle = await env.client.start_workflow(Race, id="race-1", task_queue="q")
        with pytest.raises(WorkflowUpdateFailedError, match="closed .completed. before the update 'last_word'"):
            await handle.execute_update(Race.last_word)
        assert await handle.result() == "closed"
        raw = await handle.history(raw=True)
    kinds = [e["attributes"][0] for e in raw]
    assert "WorkflowUpdateAccepted" in kinds and "WorkflowUpdateCompleted" not in kinds
    assert Replayer(workflows=[Race]).replay(raw).ok


async def test_update_with_start_and_an_update_of_no_workflow():
    async with WorkflowEnvironment(workflows=[Cart], activities=[price]) as env:
        total = await env.client.execute_update_with_start(
            Cart, "eve", id="cart-5", task_queue="q", update=Cart.add, update_args=(Item("pen", 3),)
        )
        assert total == 900
        # the run is open now: a second update-with-start updates it
        total = await env.client.execute_update_with_start(
            Cart, "eve", id="cart-5", task_queue="q", update=Cart.add, update_args=(Item("pad", 1),)
        )
        assert total == 1200
        handle = env.client.get_workflow_handle("cart-5")
        assert _types(await handle.history()).count("WorkflowExecutionStarted") == 1
        with pytest.raises(WorkflowNotFoundError):
            await env.client.get_workflow_handle("no-such-cart").execute_update(Cart.remove, "x")


def test_the_guides_example_runs_without_a_broker():
    stdout = run_example("updates.py")
    assert "items: 1\nagain: 1\nrejected: True, quantity must be positive, got 0\n" in stdout
    assert "in history: ['WorkflowUpdateAccepted', 'WorkflowUpdateCompleted']" in stdout
