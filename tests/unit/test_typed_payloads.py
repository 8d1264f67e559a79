"""Typed payloads: values travel as JSON and arrive as the types their receivers declare
(dataclasses, pydantic models, enums, datetimes, UUIDs, Optional, unions, containers), in
workflows, activities, signals, queries, children and the client's results; bad input is a
``PayloadTypeError`` naming the argument and field, never the value."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest

from kadence import PayloadTypeError, RetryPolicy, WorkflowFailureError, WorkflowNotFoundError, activity, workflow
from kadence.testing import WorkflowEnvironment
from kadence.topics import JsonConverter
from kadence.topics.payload import failure_from_exception
from kadence.topics.typed import signature
from tests.support.shop import SEEN, Counter, Line, Order, Receipt, Shop, T, Tier, price, sample_order, stamp
from tests.unit.docs_examples import run_example

# -- the converter on its own ------------------------------------------------------------------


def _roundtrip(fn, *args, method=False):
    conv = JsonConverter()
    return conv.args_from_bytes(conv.to_bytes(list(args)), fn, what="test", method=method)


def test_dataclasses_models_enums_datetimes_and_uuids_come_back_as_their_types():
    def take(
        order: Order,
        receipt: Receipt,
        when: datetime,
        ids: list[uuid.UUID],
        tier: Tier,
        maybe: Line | None,
        either: int | str,
        anything,
        untyped: Any,
    ) -> None: ...

    order = sample_order()
    receipt = Receipt(order_id="A-1", total=Decimal("12.50"), tier=Tier.GOLD, lines=2)
    got = _roundtrip(
        take, order, receipt, order.placed, [order.ref], Tier.SILVER, None, "7", {"raw": [1]}, {"raw": True}
    )
    assert got[0] == order and isinstance(got[0].lines[0], Line)
    assert got[1] == receipt and isinstance(got[1].total, Decimal)
    assert got[2] == order.placed and got[3] == [order.ref] and got[4] is Tier.SILVER
    assert got[5] is None and got[6] == "7"  # a union keeps the member that fits as it is
    assert got[7] == {"raw": [1]} and got[8] == {"raw": True}  # unannotated and Any: as decoded


def test_bad_input_names_the_argument_and_field_and_never_the_value():
    def take(order: Order) -> None: ...

    conv = JsonConverter()
    data = conv.to_bytes(
        [
            {
                "id": "A",
                "lines": [{"sku": "x", "qty": "secret-two"}],
                "placed": "2026-12-02T00:00:00Z",
                "ref": "not-a-uuid",
            }
        ]
    )
    with pytest.raises(PayloadTypeError) as info:
        conv.args_from_bytes(data, take, what="workflow Shop")
    message = str(info.value)
    assert "workflow Shop, argument 'order'" in message and "lines.0.qty" in message and "ref" in message
    assert "secret-two" not in message and "not-a-uuid" not in message
    assert info.value.field == "order"


def test_a_payload_type_error_fails_without_retries():
    failure = failure_from_exception(PayloadTypeError("activity a, argument 'x' does not match its type"))
    assert failure["type"] == "PayloadTypeError" and failure["non_retryable"] is True


def test_hints_that_do_not_resolve_leave_the_function_untyped():
    def local() -> None:
        class Hidden:
            pass

        def take(x: Hidden) -> None: ...

        return take

    fn = local()
    assert not signature(fn).typed
    assert _roundtrip(fn, {"a": 1}) == [{"a": 1}]


def test_values_json_cannot_hold_are_a_schema_error_naming_the_type():
    with pytest.raises(Exception, match="not JSON-serializable"):
        JsonConverter().to_bytes([object()])


# -- through the engine's state machine (kadence.testing, no broker) ---------------------------


@workflow.defn
class Pricing:
    @workflow.run
    async def run(self, order: Order) -> Receipt:
        return await workflow.execute_activity(price, order, start_to_close_timeout=T)


@workflow.defn
class Parent:
    @workflow.run
    async def run(self, order: Order) -> str:
        receipt = await workflow.execute_child_workflow(Pricing, order, id=f"{order.id}-child")
        return f"{type(receipt).__name__} {receipt.total}"


async def test_a_workflow_gets_and_returns_its_types_through_activities_signals_and_queries():
    SEEN.clear()
    async with WorkflowEnvironment(workflows=[Shop], activities=[price, stamp]) as env:
        handle = await env.client.start_workflow(Shop, sample_order(), id="shop-1", task_queue="q")
        await handle.signal("coupon", Line("c", 1))
        assert await handle.query(Shop.coupons_for, Tier.GOLD) == [Line("c", 1)]  # typed by the method
        raw = await handle.query("coupons_for", "gold")
        assert raw == [{"sku": "c", "qty": 1}]  # by name: as decoded ...
        assert await handle.query("coupons_for", "gold", result_type=list[Line]) == [Line("c", 1)]  # ... or typed
        receipt = await handle.result(timeout=10)
    assert receipt == Receipt(order_id="A-1", total=Decimal("7.50"), tier=Tier.GOLD, lines=3)
    assert SEEN == [Order]
    async with WorkflowEnvironment(workflows=[Shop], activities=[price, stamp]) as env:
        await env.client.start_workflow(Shop, sample_order(id="A-2"), id="shop-2", task_queue="q")
        await env.client.get_workflow_handle("shop-2").signal("coupon", {"sku": "d", "qty": 4})
        by_id = env.client.get_workflow_handle("shop-2", result_type=Receipt)
        assert (await by_id.result(timeout=10)).lines == 3


async def test_a_child_workflows_result_is_typed_by_its_run_method():
    async with WorkflowEnvironment(workflows=[Parent, Pricing], activities=[price]) as env:
        handle = await env.client.start_workflow(Parent, sample_order(id="P-1"), id="parent-1", task_queue="q")
        assert await handle.result(timeout=10) == "Receipt 7.50"


async def test_bad_arguments_are_refused_by_the_client_before_anything_is_sent():
    async with WorkflowEnvironment(workflows=[Shop], activities=[price, stamp]) as env:
        with pytest.raises(PayloadTypeError, match=r"workflow Shop, argument 'order'.*placed"):
            await env.client.start_workflow(
                Shop,
                {"id": "A", "lines": [], "placed": "yesterday", "ref": str(uuid.uuid4())},
                id="bad-1",
                task_queue="q",
            )
        with pytest.raises(WorkflowNotFoundError, match="not found"):  # nothing was sent
            await env.client.get_workflow_handle("bad-1").describe()


async def test_input_that_reaches_a_workflow_untyped_fails_the_run_not_its_task():
    """A caller that does not know the class (a type name, another language) can send anything;
    the run fails at once with PayloadTypeError instead of retrying its workflow task."""
    async with WorkflowEnvironment(workflows=[Shop], activities=[price, stamp]) as env:
        handle = await env.client.start_workflow("Shop", {"id": "A"}, id="bad-2", task_queue="q")
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result(timeout=10)
    assert info.value.failure["type"] == "PayloadTypeError" and "argument 'order'" in info.value.failure["message"]


async def test_a_signal_that_does_not_match_is_dropped_and_the_run_goes_on():
    async with WorkflowEnvironment(workflows=[Shop], activities=[price, stamp]) as env:
        handle = await env.client.start_workflow(Shop, sample_order(id="S-1"), id="sig-1", task_queue="q")
        await handle.signal("coupon", {"sku": "c"})  # no qty: dropped, with a warning
        await handle.signal("coupon", Line("c", 2))
        assert (await handle.result(timeout=10)).lines == 3


def test_the_guides_example_runs_without_a_broker():
    stdout = run_example("typed_payloads.py")
    assert "pending: [Line(sku='cup', qty=1)]" in stdout
    assert "receipt: Receipt(order_id='A-1', total=Decimal('7.50'), items=2)" in stdout
    assert "refused: workflow Checkout, argument 'order' does not match its type: placed:" in stdout


# -- queries of closed runs answer from their final state (#18 item 6) -------------------------


async def test_a_closed_run_answers_queries_from_its_final_state():
    async with WorkflowEnvironment(workflows=[Counter]) as env:
        done = await env.client.start_workflow(Counter, 3, id="count-done", task_queue="q")
        await done.signal("bump", 3)
        assert await done.result(timeout=10) == 3
        assert await done.query(Counter.value) == 3  # completed
        failed = await env.client.start_workflow(Counter, 3, id="count-failed", task_queue="q")
        await failed.signal("bump", 5)
        with pytest.raises(WorkflowFailureError):
            await failed.result(timeout=10)
        assert await failed.query("value") == 5  # failed
        stopped = await env.client.start_workflow(Counter, 3, id="count-stopped", task_queue="q")
        await stopped.signal("bump", 1)
        assert await stopped.query("value") == 1
        await stopped.terminate(reason="enough")
        assert await stopped.query("value") == 1  # terminated mid-run: the state it had


# -- errors users can catch: details kept, registered classes raised as themselves -------------


class InsufficientFunds(Exception):
    def __init__(self, message: str, balance: int = 0):
        super().__init__(message)
        self.balance = balance


@activity.defn
async def charge(amount: int) -> int:
    raise InsufficientFunds(f"cannot charge {amount}", 40)


@activity.defn
async def refuse(amount: int) -> int:
    from kadence import ApplicationError

    raise ApplicationError(
        "card declined", {"code": "DECLINED", "amount": amount}, type="CardDeclined", non_retryable=True
    )


@workflow.defn
class Pay:
    @workflow.run
    async def run(self, amount: int) -> str:
        from kadence import ActivityError, ApplicationError

        try:
            await workflow.execute_activity(refuse, amount, start_to_close_timeout=T)
        except ActivityError as err:
            declined = err.__cause__
            assert isinstance(declined, ApplicationError) and declined.type == "CardDeclined"
            code = declined.details[0]["code"]
        try:
            await workflow.execute_activity(
                charge, amount, start_to_close_timeout=T, retry_policy=RetryPolicy(maximum_attempts=1)
            )
        except ActivityError as err:
            if isinstance(err.__cause__, InsufficientFunds):
                return f"{code}; short: {err.__cause__}"
            return f"{code}; generic {type(err.__cause__).__name__} {err.__cause__.type}"
        return "paid"


async def test_failure_details_travel_and_a_registered_class_is_raised_as_itself():
    async with WorkflowEnvironment(workflows=[Pay], activities=[charge, refuse], exceptions=[InsufficientFunds]) as env:
        assert (
            await env.client.execute_workflow(Pay, 100, id="pay-1", task_queue="q")
            == "DECLINED; short: cannot charge 100"
        )
    async with WorkflowEnvironment(workflows=[Pay], activities=[charge, refuse]) as env:  # not registered
        assert (
            await env.client.execute_workflow(Pay, 100, id="pay-2", task_queue="q")
            == "DECLINED; generic ApplicationError InsufficientFunds"
        )


@workflow.defn
class Broke:
    @workflow.run
    async def run(self) -> None:
        raise InsufficientFunds("the workflow itself is short", 5)


async def test_a_client_raises_a_registered_class_as_the_cause_of_a_workflow_failure():
    async with WorkflowEnvironment(
        workflows=[Broke], exceptions=[InsufficientFunds], workflow_failure_exception_types=[InsufficientFunds]
    ) as env:
        with pytest.raises(WorkflowFailureError) as info:
            await env.client.execute_workflow(Broke, id="broke-1", task_queue="q")
    assert (
        isinstance(info.value.__cause__, InsufficientFunds)
        and str(info.value.__cause__) == "the workflow itself is short"
    )


def test_registering_something_that_is_not_an_exception_class_is_refused():
    with pytest.raises(TypeError, match="not an exception class"):
        JsonConverter(exceptions=[int])


class Opaque:  # no annotations, no schema: what a plain helper class looks like
    def __init__(self, raw):
        self.raw = raw


def test_a_class_pydantic_cannot_convert_into_leaves_its_values_as_decoded():
    def take(x: Opaque, n: int) -> None: ...

    assert _roundtrip(take, {"raw": 1}, "2") == [{"raw": 1}, 2]  # the other argument is still typed


async def test_the_test_environment_runs_payloads_through_a_codec():
    from tests.integration.codec_support import MARK, Sealed

    async with WorkflowEnvironment(workflows=[Counter], codec=Sealed()) as env:
        handle = await env.client.start_workflow(Counter, 2, id="sealed-count", task_queue="q")
        await handle.signal("bump", 2)
        assert await handle.result(timeout=10) == 2
        raw = await handle.history(raw=True)
    started = next(e["attributes"][1] for e in raw if e["attributes"][0] == "WorkflowExecutionStarted")
    assert started["input"].startswith(MARK)
