"""Interceptors and memo on ``kadence.testing`` (no broker): a client interceptor sees every call
and its start headers reach the workflow, its activities and its children; an interceptor can
refuse a call (nothing is sent); activity and workflow interceptors wrap each attempt and each
handler, also on replay; the memo is shown by describe and by ``workflow.info()``."""

from __future__ import annotations

import pytest

from kadence import Replayer
from kadence.testing import WorkflowEnvironment
from tests.support.greeter import Audit, Child, Greeter, whoami
from tests.unit.docs_examples import run_example


async def test_interceptors_see_every_call_and_carry_headers_and_memo():
    audit = Audit()
    async with WorkflowEnvironment(workflows=[Greeter, Child], activities=[whoami], interceptors=[audit]) as env:
        handle = await env.client.start_workflow(
            Greeter, "ann", id="g-1", task_queue="q", memo={"customer": {"id": 7}, "channel": "web"}
        )
        assert await handle.query(Greeter.user) == "ann"
        assert await handle.execute_update(Greeter.ping) == "pong"
        with pytest.raises(PermissionError, match="not allowed"):
            await handle.terminate(reason="no")
        described = await handle.describe()
        assert described["memo"] == {"customer": {"id": 7}, "channel": "web"} and described["status"] == "running"
        await handle.signal("finish")
        result = await handle.result()
        raw = await handle.history(raw=True)
    assert result == {
        "activity": "ANN IN WHOAMI",
        "child": "child sees ann",
        "memo": {"customer": {"id": 7}, "channel": "web"},
    }
    assert [op for op, _ in audit.client_calls] == [
        "start_workflow",
        "query",
        "update",
        "terminate",
        "describe",
        "signal",
        "result",
    ]
    assert audit.activities == [{"user": "ann"}]
    kinds = {k for k, _ in audit.workflow_calls}
    assert {"run", "query", "update", "signal"} <= kinds
    started = raw[0]["attributes"][1]
    assert started["headers"] == {"user": "ann"} and set(started["memo"]) == {"customer", "channel"}
    assert "WorkflowExecutionTerminated" not in [e["attributes"][0] for e in raw]  # the refused call sent nothing
    # a replay runs the workflow interceptor again, and the code the same way
    replayed = Audit()
    assert Replayer(workflows=[Greeter], interceptors=[replayed]).replay(raw).ok
    assert ("run", "Greeter") in replayed.workflow_calls


async def test_no_interceptor_no_headers():
    async with WorkflowEnvironment(workflows=[Greeter, Child], activities=[whoami]) as env:
        handle = await env.client.start_workflow(Greeter, "bob", id="g-2", task_queue="q")
        await handle.signal("finish")
        result = await handle.result()
        assert (await handle.describe())["memo"] == {}
    assert result == {"activity": "None in whoami", "child": "child sees None", "memo": {}}


def test_the_guides_example_runs_without_a_broker():
    stdout = run_example("interceptors.py")
    assert stdout.splitlines() == [
        "result: charged 6500 for ann via web",
        "memo: {'channel': 'web'}",
        "refused: ann may not terminate checkout-1",
        "workflow handlers run: {'run': 1}",
    ]
