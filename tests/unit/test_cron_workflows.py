"""Cron workflows (``cron_schedule=`` on a start, issue 44 item 7) under the virtual clock: the
first run's code waits for the schedule's next time, each run that completes or fails is followed
by a run with the same arguments at the time after, the chain ends with a terminate, and a
schedule that does not parse is refused before anything is sent. The broker test is
tests/integration/test_cron_workflows.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kadence import ApplicationError, CommandRejectedError, InvalidArgumentError, WorkflowTerminatedError, workflow
from kadence.testing import WorkflowEnvironment
from kadence.topics.cron import next_time_ms

HOUR_MS = 3_600_000


@workflow.defn
class Report:
    @workflow.run
    async def run(self, name: str) -> str:
        info = workflow.info()
        now = workflow.now()
        if now.hour % 2 == 1:
            raise ApplicationError(f"{name}: odd hour")  # a failed run does not end the chain
        return f"{name} at {now:%H:%M} ({info.cron_schedule})"


async def test_each_run_waits_for_its_time_and_the_next_follows_with_the_same_input():
    async with WorkflowEnvironment(workflows=[Report]) as env:
        start_ms = int(env.now().timestamp() * 1000)
        handle = await env.client.start_workflow(
            Report, "daily", id="cron-1", task_queue="q", cron_schedule="0 * * * *"
        )
        described = await handle.describe()
        first_ms = next_time_ms("0 * * * *", start_ms)
        assert described.cron_schedule == "0 * * * *"
        assert described.execution_time == datetime.fromtimestamp(first_ms / 1000, tz=UTC)
        assert [e["type"] for e in await handle.history()] == ["WorkflowExecutionStarted"]  # its code waits
        await env.sleep((first_ms - start_ms) / 1000 + 3 * 3600 + 60)  # four hourly times pass
        runs, inputs = [], []
        run_id = handle.run_id
        while run_id:
            events = await env.client.get_workflow_handle("cron-1", run_id=run_id).history()
            closed = events[-1]
            runs.append((closed["type"], closed["attributes"].get("new_run_id")))
            started = events[0]["attributes"]
            inputs.append(repr(started["input"]))
            assert started["cron_schedule"] == "0 * * * *" and started["first_task_at_ms"] % HOUR_MS == 0
            run_id = closed["attributes"].get("new_run_id")
        # four closed runs (two completed, two failed, by the hour) and the fifth waiting
        closes = [kind for kind, _ in runs[:-1]]
        assert sorted(closes) == ["WorkflowExecutionCompleted"] * 2 + ["WorkflowExecutionFailed"] * 2
        assert runs[-1] == ("WorkflowExecutionStarted", None)
        assert len(runs) == 5 and len(set(inputs)) == 1  # every run starts with the first's arguments
        latest = await env.client.get_workflow_handle("cron-1").describe()
        assert latest.status == "running" and latest.execution_time is not None
        await env.client.get_workflow_handle("cron-1").terminate(reason="enough")
        with pytest.raises(WorkflowTerminatedError):
            await handle.result(timeout=10)  # the first run's handle follows the chain to its end


async def test_a_run_closes_into_the_next_and_a_terminate_of_the_workflow_ends_the_chain():
    async with WorkflowEnvironment(workflows=[Report]) as env:
        handle = await env.client.start_workflow(Report, "x", id="cron-2", task_queue="q", cron_schedule="@every 2h")
        await env.sleep(5 * 3600)
        first, latest = await handle.describe(), await env.client.get_workflow_handle("cron-2").describe()
        assert first.status == "completed" and first.continued_run_id is not None  # closed into the next run
        assert latest.status == "running" and latest.run_id != handle.run_id
        with pytest.raises(CommandRejectedError, match="not the current run"):
            await handle.terminate(reason="stop")  # a handle with a run ID is that run's (it closed)
        await env.client.get_workflow_handle("cron-2").terminate(reason="stop")  # the workflow's
        with pytest.raises(WorkflowTerminatedError):
            await handle.result(timeout=10)


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("* * * *", "is not five cron fields"),
        ("*/5 * * * * *", "is not five cron fields"),
        ("@sometimes", "unknown descriptor"),
        ("@every 0s", "at least 1s"),
        ("CRON_TZ=Nowhere/City 0 9 * * *", "unknown time zone"),
    ],
)
async def test_a_schedule_that_does_not_parse_is_refused_before_anything_is_sent(schedule, message):
    async with WorkflowEnvironment(workflows=[Report]) as env:
        with pytest.raises(InvalidArgumentError, match=message) as info:
            await env.client.start_workflow(Report, "x", id="cron-bad", task_queue="q", cron_schedule=schedule)
        assert info.value.field == "cron_schedule"
        with pytest.raises(Exception, match="not found"):
            await env.client.get_workflow_handle("cron-bad").describe()


def test_schedule_times():
    t = int(datetime(2026, 12, 6, 10, 7, 30, tzinfo=UTC).timestamp() * 1000)

    def at(schedule: str) -> str:
        return datetime.fromtimestamp(next_time_ms(schedule, t) / 1000, tz=UTC).isoformat()

    assert at("*/15 * * * *") == "2026-12-06T10:15:00+00:00"
    assert at("@daily") == "2026-12-07T00:00:00+00:00"
    assert at("0 9 * * MON-FRI") == "2026-12-07T09:00:00+00:00"  # the 6th is a Sunday
    assert at("CRON_TZ=Asia/Tokyo 0 9 * * *") == "2026-12-07T00:00:00+00:00"  # 09:00 in Tokyo
    assert at("@every 90m") == "2026-12-06T10:30:00+00:00"  # multiples of 90 minutes since the epoch
    assert next_time_ms("@every 1s", 5_000) == 6_000  # strictly after


@workflow.defn
class Slow:
    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(7200)  # outlasts its run timeout
        return "never"


async def test_a_paused_cron_run_holds_its_time_and_a_held_run_timeout_closes_it_into_the_next():
    async with WorkflowEnvironment(workflows=[Report, Slow]) as env:
        waiting = await env.client.start_workflow(Report, "p", id="cron-p", task_queue="q", cron_schedule="@hourly")
        await waiting.pause(reason="hold it")
        await env.sleep(2 * 3600)  # its time passed while paused: held, nothing ran
        assert [e["type"] for e in await waiting.history()][-1] == "WorkflowExecutionPaused"
        await waiting.unpause(reason="go")
        await env.sleep(1)
        kinds = [e["type"] for e in await waiting.history()]
        assert "WorkflowTaskScheduled" in kinds and kinds[-1] in (
            "WorkflowExecutionCompleted",
            "WorkflowExecutionFailed",
        )

        slow = await env.client.start_workflow(
            Slow, id="cron-s", task_queue="q", cron_schedule="@hourly", run_timeout=timedelta(minutes=30)
        )
        due = (await slow.describe()).execution_time
        await env.sleep((due - env.now()).total_seconds() + 60)  # the first run's code started (and sleeps)
        await slow.pause(reason="hold it")
        await env.sleep(3600)  # its run timeout falls due while paused: held
        await slow.unpause(reason="go")  # the held timeout closes the run into the next one
        first = await slow.describe()
        assert first.status == "timed_out" and first.continued_run_id is not None
        latest = await env.client.get_workflow_handle("cron-s").describe()
        assert latest.run_id == first.continued_run_id and latest.status == "running" and not latest.paused
