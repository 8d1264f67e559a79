"""A timer that fires while the workflow task that cancels it is in flight (found by ``make
chaos`` with the schedule workflow, whose wait for its next time is cut short by a run's end):
the history reads TimerStarted, ..., WorkflowTaskScheduled, TimerFired, WorkflowTaskCompleted,
TimerCanceled (a no-op: ``started_seq`` 0). The code canceled the timer before it saw the fire,
so the fire is nothing to it: neither the live worker's next task nor a full replay may fail
with "fires timer that the code never started"."""

from __future__ import annotations

from kadence import workflow
from kadence.topics.payload import JsonConverter

from .engine_harness import Harness
from .replay_support import instance_of

conv = JsonConverter()


@workflow.defn
class RaceTimer:
    def __init__(self) -> None:
        self.poked = False

    @workflow.signal
    def poke(self) -> None:
        self.poked = True

    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.wait_condition(lambda: self.poked, timeout=60)
        except TimeoutError:
            return "timed out"
        await workflow.sleep(1)  # a task after the race: the cached instance sees the fire in it
        return "poked"


def _complete(h: Harness, task: dict, cmds: list) -> None:
    h.send(
        task["workflow_id"],
        "RespondWorkflowTaskCompleted",
        {"scheduled_seq": task["scheduled_seq"], "commands": cmds},
        run_id=task["run_id"],
    )


def test_a_timer_canceled_after_it_fired_is_a_no_op_live_and_in_replay():
    h = Harness()
    h.start("race-1", "RaceTimer", [])
    [first] = h.take_tasks("workflow")
    inst = instance_of(RaceTimer, first)
    _complete(h, first, inst.apply(first["events"], first["scheduled_seq"]))
    assert [k for k in (e["attributes"][0] for e in h.events)][-1] == "TimerStarted"
    # the signal schedules a task; the timer fires before the worker completes it
    h.send("race-1", "SignalWorkflow", {"signal_name": "poke", "input": conv.to_bytes([])}, request_id="s1")
    [second] = h.take_tasks("workflow")
    h.fire_timers()
    cmds = inst.apply(second["events"], second["scheduled_seq"])
    _complete(h, second, cmds)
    kinds = [e["attributes"][0] for e in h.events]
    fired, canceled = kinds.index("TimerFired"), kinds.index("TimerCanceled")
    assert kinds.index("WorkflowTaskScheduled", 4) < fired < canceled  # the race, as chaos saw it
    # the cached instance goes on (its next task carries the fire), to the end
    while True:
        tasks = h.take_tasks("workflow")
        if not tasks:
            if not h.fire_timers():
                break
            continue
        for task in tasks:
            _complete(h, task, inst.apply(task["events"], task["scheduled_seq"]))
    assert h.events[-1]["attributes"][0] == "WorkflowExecutionCompleted"
    assert conv.from_bytes(h.events[-1]["attributes"][1]["result"]) == "poked"
    assert inst._canceled_timers == {}  # the race's memory is let go once the cancel is read
    # and a fresh instance replays the whole history
    fresh = instance_of(RaceTimer, {"workflow_id": "race-1", "run_id": h.events[0]["run_id"]})
    assert fresh.apply(h.events, scheduled_seq=-1) == []
    assert fresh.closed
