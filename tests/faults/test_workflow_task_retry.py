"""A workflow stuck on a non-deterministic task heals by itself once the fixed code is deployed:
the failed workflow task is retried with backoff (timer service running), no operator needed."""

from kadence import Worker, workflow
from tests.integration.conftest import wait_until
from tests.integration.workflows import GATES, Gated, GatedChanged, T, add, double, gate


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


@workflow.defn(name="Suspends")
class SuspendsBroken:
    """A new deploy with a bug: a TypeError after the first activity."""

    @workflow.run
    async def run(self, n: int) -> int:
        a = await workflow.execute_activity(add, n, 1, start_to_close_timeout=T)
        return a + "1"  # TypeError: a bug, not the workflow's outcome


@workflow.defn(name="Suspends")
class SuspendsFixed:
    @workflow.run
    async def run(self, n: int) -> int:
        a = await workflow.execute_activity(add, n, 1, start_to_close_timeout=T)
        return a + 1


async def test_a_bug_in_workflow_code_suspends_the_run_through_twenty_retries_until_the_fix_resumes_it(
    client, processors
):
    """Issue 44: an exception that is not a FailureError fails the workflow task, not the run; the
    task is retried with backoff (the processor's setting, short here) for as long as it takes."""
    processors.start(env={"KADENCE_WORKFLOW_TASK_RETRY_INITIAL_MS": "20", "KADENCE_WORKFLOW_TASK_RETRY_MAX_MS": "150"})
    processors.start_timers()
    wid = "suspends-1"
    async with Worker(client, task_queue="bugs", workflows=[SuspendsBroken], activities=[add]):
        handle = await client.start_workflow(SuspendsBroken, 4, id=wid, task_queue="bugs")

        async def retried_twenty_times() -> bool:
            events = await handle.history()
            return max(e["attributes"]["attempt"] for e in events if e["type"] == "WorkflowTaskScheduled") >= 21

        await wait_until(retried_twenty_times, 120, "20 retries of the failing workflow task")
        d = await handle.describe()
    assert d["status"] == "running"
    assert d["last_task_failure"]["type"] == "TypeError"
    assert d["last_task_failure"]["cause"] == "workflow_error"
    # the retries kept their backoff: attempt k+1 was scheduled at least min(20 ms x 2^(k-1), 150 ms)
    # after attempt k (the delay runs from attempt k's failure, which came after its scheduling)
    events = await handle.history(raw=True)
    scheduled = {
        e["attributes"][1]["attempt"]: e["timestamp_ms"]
        for e in events
        if e["attributes"][0] == "WorkflowTaskScheduled"
    }
    for k in range(2, 21):
        assert scheduled[k + 1] - scheduled[k] >= min(20 << (k - 1), 150), (k, scheduled)
    # the fix is deployed: the next retry runs it to completion, in the same run
    async with Worker(client, task_queue="bugs", workflows=[SuspendsFixed], activities=[add]):
        assert await handle.result(timeout=60) == 6
    events = await handle.history()
    types = [e["type"] for e in events]
    assert "WorkflowExecutionFailed" not in types and types[-1] == "WorkflowExecutionCompleted"
    assert types.count("ActivityTaskCompleted") == 1  # the activity before the bug ran once
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert (await handle.describe()).get("last_task_failure") is None
