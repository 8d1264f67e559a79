"""A workflow stuck on a non-deterministic task heals by itself once the fixed code is deployed:
the failed workflow task is retried with backoff (timer service running), no operator needed."""

from kadence import Worker
from tests.integration.conftest import wait_until
from tests.integration.workflows import GATES, Gated, GatedChanged, add, double, gate


async def test_a_stuck_workflow_completes_after_the_fix_is_deployed_without_a_reset(client, processors):
    processors.start()
    processors.start_timers()
    wid = "retry-1"
    GATES.pop(wid, None)
    async with Worker(client, task_queue="gates", activities=[gate]):
        async with Worker(client, task_queue="q", workflows=[Gated], activities=[add, double]):
            handle = await client.start_workflow(Gated, 4, id=wid, task_queue="q")
            await wait_until(lambda: wid in GATES, 60, "the gate to start")
        # a broken deployment: the next workflow task fails on non-determinism, and its retries too
        async with Worker(client, task_queue="q", workflows=[GatedChanged], activities=[add, double]):
            GATES[wid].set()

            async def retried_and_still_stuck():
                d = await handle.describe()
                events = await handle.history()
                attempts = [e["attributes"]["attempt"] for e in events if e["type"] == "WorkflowTaskScheduled"]
                return d["status"] == "running" and d.get("last_task_failure") and max(attempts) >= 2

            await wait_until(retried_and_still_stuck, 60, "a failed workflow task to be retried (and fail again)")
        # the fix is deployed: the next automatic retry (backoff <= 8 s here) completes the workflow
        async with Worker(client, task_queue="q", workflows=[Gated], activities=[add, double]):
            result = await handle.result(timeout=90)
    assert result == [5, "opened:g", 10]
    events = await handle.history()
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert sum(e["type"] == "WorkflowExecutionTerminated" for e in events) == 0  # no reset, same run
    assert (await handle.describe()).get("last_task_failure") is None
