"""Child workflows under a processor crash: every child runs once, the parent gets every result."""

import asyncio
import collections

from kadence import Worker
from tests.integration.conftest import wait_until
from tests.integration.invariants import check_history, histories
from tests.integration.workflows import EFFECTS, AddChild, FanOut, add


async def test_fifty_children_with_a_processor_kill_midway(client, processors, kafka_config):
    EFFECTS.clear()
    n = 50
    processors.start()
    async with Worker(client, task_queue="q", workflows=[FanOut, AddChild], activities=[add]):
        handle = await client.start_workflow(FanOut, n, id="fan-1", task_queue="q")
        result = asyncio.ensure_future(handle.result(timeout=240))
        await wait_until(lambda: len(EFFECTS) >= n // 3, 120, "a third of the children to run")
        processors.kill()
        assert not result.done()
        processors.start()
        values = await result
    assert values == [i + 1000 for i in range(n)]
    runs = histories(kafka_config)
    children = collections.Counter(wf for wf, _ in runs if wf.startswith("fan-1/child-"))
    assert len(children) == n and set(children.values()) == {1}, "each child ran exactly one run"
    assert all(check_history(events) == [] for events in runs.values())
    assert len(EFFECTS) == n and set(EFFECTS.values()) == {1}, "each child's activity had its effect once"
    parent = next(events for (wf, _), events in runs.items() if wf == "fan-1")
    kinds = [e["attributes"][0] for e in parent]
    assert kinds.count("StartChildWorkflowExecutionInitiated") == n
    assert kinds.count("ChildWorkflowExecutionCompleted") == n
