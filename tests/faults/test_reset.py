"""Reset of a workflow stuck on a non-deterministic task, after the fixed code is deployed."""

import json

from kadence import Worker
from tests.integration.conftest import wait_until
from tests.integration.workflows import GATES, Gated, GatedChanged, add, double, gate
from tests.support.cli import kadence


async def test_reset_of_a_stuck_workflow_completes_it_and_history_shows_the_branch(client, processors, kafka_config):
    processors.start()
    GATES.pop("reset-1", None)
    async with Worker(client, task_queue="gates", activities=[gate]):
        async with Worker(client, task_queue="q", workflows=[Gated], activities=[add, double]):
            handle = await client.start_workflow(Gated, 4, id="reset-1", task_queue="q")
            await wait_until(lambda: "reset-1" in GATES, 60, "the gate to start")
        async with Worker(client, task_queue="q", workflows=[GatedChanged], activities=[add, double]):
            GATES["reset-1"].set()

            async def stuck():
                return (await handle.describe())["last_task_failure"]

            await wait_until(stuck, 60, "the workflow to be stuck on a non-deterministic task")
        old_run = handle.run_id
        # the fixed code is deployed; the dry run replays the part of the history a reset keeps
        rc, out, err = await kadence(
            kafka_config, "reset", "reset-1", "--dry-run", "--module", "tests.integration.gated_fixed"
        )
        assert rc == 0, err
        plan = json.loads(out)
        assert plan["dry_run"] is True and plan["replayed_with"] == "tests.integration.gated_fixed"
        assert plan["from_status"] == "running" and plan["terminates_run_id"] == handle.run_id
        rc, out, err = await kadence(
            kafka_config, "reset", "reset-1", "--dry-run", "--module", "tests.replay.workflows_unsafe"
        )
        assert rc == 1
        async with Worker(client, task_queue="q", workflows=[Gated], activities=[add, double]):
            rc, out, err = await kadence(kafka_config, "reset", "reset-1", "--reason", "deployed fix")
            assert rc == 0, err
            new_run = json.loads(out)["new_run_id"]
            assert new_run != old_run
            result = await client.get_workflow_handle("reset-1").result(timeout=60)
    assert result == [5, "opened:g", 10]
    # a closed run can be reset too (issue 17), and its dry run says exactly that
    rc, out, err = await kadence(kafka_config, "reset", "reset-1", "--dry-run", "--to-event", "3")
    assert rc == 0, err
    assert {k: v for k, v in json.loads(out).items() if k != "workflow_id"} == {
        "dry_run": True,
        "branch_event": 3,
        "from_status": "completed",
        "terminates_run_id": None,
        "kept_events": 2,
        "activities_rerun": [],
        "timers_kept": 0,
        "new_run_id": None,
    }
    rc, out, err = await kadence(kafka_config, "reset", "reset-1", "--dry-run", "--to-event", "2")
    assert rc == 1 and out == "" and "would be rejected: event 2 is not a WorkflowTaskCompleted" in err, (rc, out, err)
    old = await client.get_workflow_handle("reset-1", run_id=old_run).history()
    assert old[-1]["type"] == "WorkflowExecutionTerminated" and new_run in old[-1]["attributes"]["reason"]
    new = await client.get_workflow_handle("reset-1", run_id=new_run).history()
    assert new[0]["attributes"]["continued_from_run_id"] == old_run
    assert new[-1]["type"] == "WorkflowExecutionCompleted"
    assert [e["seq"] for e in new] == list(range(1, len(new) + 1))

    GATES.pop("reset-1", None)
    async with Worker(client, task_queue="gates", activities=[gate]):
        async with Worker(client, task_queue="q", workflows=[Gated], activities=[add, double]):
            rc, out, err = await kadence(kafka_config, "reset", "reset-1", "--to-event", "3", "--reason", "again")
            assert rc == 0, err
            again = json.loads(out)["new_run_id"]
            await wait_until(lambda: "reset-1" in GATES, 60, "the gate to start")
            GATES["reset-1"].set()
            assert await client.get_workflow_handle("reset-1").result(timeout=60) == [5, "opened:g", 10]
    closed = await client.get_workflow_handle("reset-1", run_id=new_run).history()
    assert closed[-1]["type"] == "WorkflowExecutionCompleted"  # the closed run stays as it ended
    third = await client.get_workflow_handle("reset-1", run_id=again).history()
    assert (
        third[0]["attributes"]["continued_from_run_id"] == new_run and third[-1]["type"] == "WorkflowExecutionCompleted"
    )
