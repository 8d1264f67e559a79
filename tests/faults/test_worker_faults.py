"""Worker restarts and non-deterministic code changes, on the real broker."""

from kadence import Worker
from tests.integration.conftest import wait_until
from tests.integration.invariants import check_history, histories
from tests.integration.workflows import GATES, Gated, GatedChanged, add, double, gate


async def _start_gated(client, workflow_id: str, n: int):
    GATES.pop(workflow_id, None)
    handle = await client.start_workflow(Gated, n, id=workflow_id, task_queue="q")
    await wait_until(lambda: workflow_id in GATES, 60, "the gate activity to start")
    return handle


async def test_worker_restart_mid_workflow_rebuilds_state_from_history(client, processors, kafka_config):
    processors.start()
    async with Worker(client, task_queue="gates", activities=[gate]):
        first = Worker(client, task_queue="q", workflows=[Gated], activities=[add, double])
        async with first:
            handle = await _start_gated(client, "restart-1", 20)
        # it ran the start's task, and the next one (eagerly, with add's result)
        assert first.stats["workflow_tasks"] + first.stats["eager_workflow_tasks"] >= 2
        # a new worker, with nothing cached, picks the workflow up when the gate opens
        second = Worker(client, task_queue="q", workflows=[Gated], activities=[add, double])
        async with second:
            GATES["restart-1"].set()
            assert await handle.result(timeout=60) == [21, "opened:g", 42]
        assert second.stats["history_requests"] >= 1, "the new worker must have replayed the full history"
    [(_, events)] = [(k, v) for k, v in histories(kafka_config).items() if k[0] == "restart-1"]
    assert check_history(events) == []


async def test_non_deterministic_change_fails_the_task_and_leaves_history_intact(client, processors):
    processors.start()
    async with Worker(client, task_queue="gates", activities=[gate]):
        async with Worker(client, task_queue="q", workflows=[Gated], activities=[add, double]):
            handle = await _start_gated(client, "nd-1", 1)
        before = await handle.history()
        changed = Worker(client, task_queue="q", workflows=[GatedChanged], activities=[add, double])
        async with changed:
            GATES["nd-1"].set()
            desc = await wait_until(_stuck(handle), 60, "the workflow task to fail")
            assert desc["status"] == "running"
            assert desc["last_task_failure"]["cause"] == "non_determinism"
            assert desc["last_task_failure"]["type"] == "NonDeterminismError"
            assert (
                "history event 4 is ActivityTaskScheduled(activity_type='add'" in desc["last_task_failure"]["message"]
            )
            assert changed.stats["non_determinism"] >= 1
        after = await handle.history()
    # the failed task recorded nothing: history = what it was + the gate's completion and the
    # workflow task it scheduled
    assert after[: len(before)] == before
    assert [e["type"] for e in after[len(before) :]] == ["ActivityTaskCompleted", "WorkflowTaskScheduled"]


def _stuck(handle):
    async def check():
        desc = await handle.describe()
        return desc if desc["last_task_failure"] else None

    return check
