"""Pause/unpause and reset of closed runs with a truthful dry run (#17): the state machine and the
SDK's replay agree (pure logic, in memory; tests/integration/test_pause_reset.py runs the same on a
real broker)."""

from datetime import timedelta

import pytest

from kadence import RetryPolicy, activity, workflow
from kadence.processors.effects import Outbox, description
from kadence.topics import serde
from kadence.topics.payload import JsonConverter

from .engine_harness import Driver

conv = JsonConverter()


@activity.defn
async def echo(x):
    return x


@workflow.defn
class Holdable:
    def __init__(self):
        self.got = []

    @workflow.signal
    def add(self, item):
        self.got.append(item)

    @workflow.run
    async def run(self):
        await workflow.sleep(30)
        done = await workflow.execute_activity(echo, "a", start_to_close_timeout=timedelta(seconds=10))
        return [done, self.got]


@workflow.defn
class Retried:
    @workflow.run
    async def run(self):
        return await workflow.execute_activity(
            echo,
            "b",
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1)),
        )


@workflow.defn
class TwoSteps:
    @workflow.run
    async def run(self):
        one = await workflow.execute_activity(echo, 1, start_to_close_timeout=timedelta(seconds=10))
        two = await workflow.execute_activity(echo, 2, start_to_close_timeout=timedelta(seconds=10))
        return one + two


def _pause(d, rid="p1", kind="PauseWorkflow"):
    out = d.h.send("wf", kind, {"reason": "ops", "identity": "ann"}, request_id=rid)
    [r] = out.replies
    return r


def _signal(d, item, rid):
    d.h.send(
        "wf",
        "SignalWorkflow",
        {"signal_name": "add", "input": conv.to_bytes([item]), "identity": "t", "start": None},
        request_id=rid,
    )


def test_a_paused_run_records_signals_holds_its_timer_and_fires_it_at_unpause():
    d = Driver(Holdable)
    d.h.start("wf", "Holdable", [])
    d.run(fire_timers=False)  # the run sleeps: one user timer pending
    assert _pause(d)["status"] == "ok" and d.state()["paused"] and description(d.state(), Outbox())["paused"]
    assert d.h.fire_timers() == 1
    _signal(d, "s1", "sig-1")
    assert not d.step()  # no workflow task went out: not for the timer, not for the signal
    st = d.state()
    assert [t["kind"] for t in st["held_timers"]] == ["user"] and st["wt_needed"] and st["wt_scheduled_seq"] is None
    assert d.kinds()[-2:] == ["WorkflowExecutionPaused", "WorkflowSignaled"]
    again = _pause(d, rid="p2")  # pausing a paused run: ok, nothing recorded
    assert again["message"] == "the run was paused already" and d.kinds()[-1] == "WorkflowSignaled"
    assert _pause(d, rid="u1", kind="UnpauseWorkflow")["status"] == "ok"
    assert d.kinds()[-3:] == ["WorkflowExecutionUnpaused", "TimerFired", "WorkflowTaskScheduled"]
    d.run()
    assert d.state()["status"] == "completed" and conv.from_bytes(d.state()["result"]) == ["a", ["s1"]]
    assert d.kinds().count("TimerFired") == 1 and not d.state()["held_timers"]


def test_an_activity_scheduled_while_paused_is_held_with_no_deadline_and_sent_at_unpause():
    d = Driver(TwoSteps)
    d.h.start("wf", "TwoSteps", [])
    [task] = d.h.take_tasks("workflow")  # the first workflow task is out with a worker
    _pause(d)
    d.h.tasks.append(("workflow", "q", task))
    d.step()  # the worker completes it: recorded, its activity scheduled but held
    [a] = d.state()["pending_activities"]
    assert a["held"] and not d.h.take_tasks("activity") and d.h.deadlines() == []
    assert d.kinds()[-1] == "ActivityTaskScheduled"
    _pause(d, rid="u1", kind="UnpauseWorkflow")
    [sent] = d.h.take_tasks("activity")
    assert sent["attempt"] == 1 and not d.state()["pending_activities"][0]["held"]
    assert {t["kind"] for t in d.h.deadlines()} == {"activity_timeout"}  # armed from the unpause
    d.h.tasks.append(("activity", "q", sent))
    d.run()
    assert conv.from_bytes(d.state()["result"]) == 3


def test_a_retry_backoff_that_falls_due_while_paused_is_held_and_retried_at_unpause():
    attempts = []

    def flaky(task, args):
        attempts.append(task["attempt"])
        return ("fail", "down") if task["attempt"] == 1 else ("ok", args[0])

    d = Driver(Retried, flaky)
    d.h.start("wf", "Retried", [])
    d.run(fire_timers=False)  # attempt 1 failed: a retry-backoff timer is pending
    _pause(d)
    d.h.fire_timers()
    assert not d.step() and [t["kind"] for t in d.state()["held_timers"]] == ["retry_backoff"]
    _pause(d, rid="u1", kind="UnpauseWorkflow")
    d.run()
    assert attempts == [1, 2] and conv.from_bytes(d.state()["result"]) == "b"


def test_pause_is_deduplicated_by_request_id_and_refused_for_a_closed_run():
    d = Driver(TwoSteps)
    d.h.start("wf", "TwoSteps", [])
    first, second = _pause(d, rid="p1"), _pause(d, rid="p1")
    assert first == second and d.kinds().count("WorkflowExecutionPaused") == 1
    _pause(d, rid="u1", kind="UnpauseWorkflow")
    assert _pause(d, rid="u1", kind="UnpauseWorkflow")["status"] == "ok"
    assert d.kinds().count("WorkflowExecutionUnpaused") == 1
    d.run()
    closed = _pause(d, rid="p9")
    assert (closed["status"], closed["message"]) == ("rejected", "workflow is completed")
    assert not d.state()["paused"]


def test_a_run_closed_while_paused_is_not_paused_any_more():
    d = Driver(Holdable)
    d.h.start("wf", "Holdable", [])
    d.run(fire_timers=False)
    _pause(d)
    d.h.fire_timers()
    d.h.send("wf", "TerminateWorkflow", {"reason": "done", "identity": "t"}, request_id="t1")
    st = d.state()
    assert st["status"] == "terminated" and not st["paused"] and st["held_timers"] == []


# --- reset -------------------------------------------------------------------------------------


def _completed(d) -> list[int]:
    return [
        e["seq"]
        for e in d.h.events
        if e["attributes"][0] == "WorkflowTaskCompleted" and e["run_id"] == d.state()["run_id"]
    ]


def _reset(d, point, *, dry_run, rid, kept=None, run_id=None):
    body = {
        "workflow_task_completed_seq": point,
        "reason": "fix",
        "identity": "ann",
        "dry_run": dry_run,
        "kept_events": kept or [],
    }
    out = d.h.send("wf", "ResetWorkflow", body, request_id=rid, run_id=run_id)
    [r] = out.replies
    return r, out


def _kept(d, point):
    run = d.state()["run_id"]
    return [serde.encode("HistoryEvent", e) for e in d.h.events if e["run_id"] == run and e["seq"] <= point]


def _finished_two_steps():
    d = Driver(TwoSteps)
    d.h.start("wf", "TwoSteps", [])
    d.run()
    assert d.state()["status"] == "completed"
    return d


def test_a_closed_run_is_reset_from_the_events_sent_with_the_reset_and_stays_as_it_ended():
    d = _finished_two_steps()
    old = d.state()["run_id"]
    first_task = _completed(d)[0]
    r, _out = _reset(d, first_task, dry_run=False, rid="reset-1", kept=_kept(d, first_task))
    assert r["status"] == "ok", r["message"]
    assert r["reset_plan"] == {
        "terminates_run_id": None,
        "from_status": "completed",
        "branch_event": first_task,
        "kept_events": first_task - 1,
        "activities_rerun": [],
        "timers_kept": 0,
    }
    assert d.kinds(old).count("WorkflowExecutionTerminated") == 0  # the closed run stays completed
    new = d.state()
    assert new["run_id"] == r["run_id"] != old and new["status"] == "running"
    d.run()
    assert conv.from_bytes(d.state()["result"]) == 3
    assert d.kinds(r["run_id"]).count("ActivityTaskScheduled") == 2  # the new run's code decided again


CASES = {
    "open run": lambda d: (d, _completed(d)[-1], None),
    "closed run": lambda d: (d, _completed(d)[0], "kept"),
    "closed run, no events sent": lambda d: (d, _completed(d)[0], None),
    "not a completed task": lambda d: (d, 2, "kept"),
    "events of another run": lambda d: (d, _completed(d)[0], "forged"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_dry_run_answers_what_the_reset_then_does_and_writes_nothing(case):
    d = Driver(TwoSteps)
    d.h.start("wf", "TwoSteps", [])
    if case == "open run":
        d.step()  # one workflow task done, the first activity out
        d.h.take_tasks("activity")
    else:
        d.run()
    d, point, kept = CASES[case](d)
    if kept == "kept":
        kept = _kept(d, point)
    elif kept == "forged":
        kept = [
            serde.encode("HistoryEvent", {**serde.decode("HistoryEvent", b), "run_id": "other"})
            for b in _kept(d, point)
        ]
    before = (list(d.h.events), dict(d.state()), len(d.h.tasks), len(d.h.timers))
    plan, out = _reset(d, point, dry_run=True, rid="dry", kept=kept)
    assert not (out.events or out.tasks or out.timers or out.commands)
    assert (list(d.h.events), dict(d.state()), len(d.h.tasks), len(d.h.timers)) == before
    real, _ = _reset(d, point, dry_run=False, rid="real", kept=kept)
    assert (plan["status"], plan["message"], plan["reset_plan"]) == (
        real["status"],
        real["message"],
        real["reset_plan"],
    )
    assert plan["run_id"] is None if real["status"] == "ok" else plan["run_id"] == real["run_id"]
    if case in ("open run", "closed run"):
        assert real["status"] == "ok" and real["reset_plan"]["branch_event"] == point
    else:
        assert real["status"] == "rejected" and real["message"]


def test_a_dry_run_of_an_open_run_names_the_run_it_would_terminate():
    d = Driver(TwoSteps)
    d.h.start("wf", "TwoSteps", [])
    d.step()
    d.h.take_tasks("activity")
    plan, _ = _reset(d, _completed(d)[-1], dry_run=True, rid="dry")
    # reset to the first completed task (seq 3): the start and its task are kept, the code decides again
    assert plan["reset_plan"] == {
        "terminates_run_id": d.state()["run_id"],
        "from_status": "running",
        "branch_event": 3,
        "kept_events": 2,
        "activities_rerun": [],
        "timers_kept": 0,
    }
    assert d.state()["status"] == "running"


# --- the SDK on kadence.testing (the same state machine, behind the real Client) ----------------


async def test_the_client_pauses_unpauses_and_resets_a_closed_run_after_a_truthful_dry_run():
    from kadence import ResetPlan, ResetRejectedError
    from kadence.testing import WorkflowEnvironment

    async with WorkflowEnvironment(workflows=[Holdable, TwoSteps], activities=[echo]) as env:
        handle = await env.client.start_workflow(Holdable, id="h-1", task_queue="q")
        await env.sleep(1)
        await handle.pause(reason="investigating")
        assert (await handle.describe())["paused"] is True
        await handle.signal("add", "s1")
        await env.sleep(60)  # the timer falls due while paused: held
        assert (await handle.describe())["status"] == "running"
        await handle.unpause()
        assert await handle.result() == ["a", ["s1"]]
        types = [e["type"] for e in await handle.history()]
        assert (
            types.index("WorkflowExecutionPaused")
            < types.index("WorkflowSignaled")
            < types.index("WorkflowExecutionUnpaused")
            < types.index("TimerFired")
        )

        done = env.client.get_workflow_handle("t-1")
        assert await env.client.execute_workflow(TwoSteps, id="t-1", task_queue="q") == 3
        first = next(e["seq"] for e in await done.history() if e["type"] == "WorkflowTaskCompleted")
        plan = await done.plan_reset(to_event=first)
        assert plan == ResetPlan(
            workflow_id="t-1",
            branch_event=first,
            from_status="completed",
            terminates_run_id=None,
            kept_events=first - 1,
            activities_rerun=(),
            timers_kept=0,
        )
        assert (await done.describe())["status"] == "completed"  # the dry run changed nothing
        with pytest.raises(ResetRejectedError, match="would be rejected: event 2 is not a WorkflowTaskCompleted"):
            await done.plan_reset(to_event=2)
        with pytest.raises(ResetRejectedError, match="rejected: event 2 is not a WorkflowTaskCompleted"):
            await done.reset(to_event=2)
        new = await done.reset(to_event=first, reason="replay with the fix")
        assert new.run_id != done.run_id and await new.result() == 3


def test_the_guides_example_runs_without_a_broker():
    from tests.unit.docs_examples import run_example

    lines = run_example("pause_and_reset.py").splitlines()
    assert lines[0] == "paused: True, timers held: 1, reminders sent: 0"
    assert lines[1] == "result: {'sent': 'reminded ann', 'notes': ['check the address']}"
    assert lines[2] == "plan: branch at event 3 of a completed run, 2 events kept, terminates an open run: False"
    assert lines[3].startswith(
        "refused: reset of 'reminder-ann' would be rejected: event 2 is not a WorkflowTaskCompleted of run "
    )
    assert lines[4] == "new run's result: {'sent': 'reminded ann', 'notes': []} | reminders sent: 2"
