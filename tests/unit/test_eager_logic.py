"""Eager workflow tasks (decision 0031): the worker runs a workflow's next task right after an
activity completes and sends both in one command; the state machine records it only when nothing
else happened to the workflow since the task the worker's instance last completed.

Pure logic, in memory (the state machine and the SDK's workflow instance); the integration tests
run the real worker on a real broker."""

import asyncio

from kadence import activity, workflow
from kadence._instance import WorkflowInfo, WorkflowInstance
from kadence.processors.state_machine import EAGER_MAX_SKEW_MS
from kadence.topics.payload import JsonConverter
from kadence.topics.records import now_ms

from .engine_harness import Harness

conv = JsonConverter()


@activity.defn
async def step(x):
    return x


@workflow.defn
class Chain:
    @workflow.run
    async def run(self, n):
        for _ in range(3):
            n = await workflow.execute_activity(step, n + 1)
        return n


@workflow.defn
class Timestamps:
    @workflow.run
    async def run(self):
        times = [workflow.now().timestamp()]
        for i in range(2):
            await workflow.execute_activity(step, i)
            times.append(workflow.now().timestamp())
        return times


@workflow.defn
class Pair:
    @workflow.run
    async def run(self):
        a, b = await asyncio.gather(workflow.execute_activity(step, 1), workflow.execute_activity(step, 2))
        return a + b


@workflow.defn
class Listener:
    def __init__(self):
        self.pings = 0

    @workflow.signal
    def ping(self):
        self.pings += 1

    @workflow.run
    async def run(self):
        first = await workflow.execute_activity(step, 1)
        second = await workflow.execute_activity(step, 2)
        return [first, second, self.pings]


class EagerDriver:
    """What the worker does, against the in-memory harness: one cached instance; an activity's
    result runs the next workflow task eagerly when the instance allows it; a task that does not
    confirm an eager task discards the instance."""

    def __init__(self, cls, *, eager=True, clock=now_ms):
        self.h = Harness()
        self.cls = cls
        self.inst = None
        self.eager = eager
        self.clock = clock
        self.workflow_tasks = 0
        self.eager_sent = 0
        self.refused = 0
        self.accepted = 0
        self.refused_by_engine = 0
        self._ids = 0

    def _new_instance(self, task):
        d = self.cls.__kadence_workflow__
        return WorkflowInstance(d, WorkflowInfo(task["workflow_id"], task["run_id"], d.name, "q"), conv)

    def workflow_task(self, task):
        self.workflow_tasks += 1
        inst = self.inst
        if inst is not None and inst.eager_token is not None:
            if task["full_history"] or not task["events"] or not inst.confirm_eager(task["events"][0]):
                self.refused += 1
                inst = None
        if task["full_history"]:
            inst = self._new_instance(task)
        elif inst is None:
            self.h.send(
                task["workflow_id"],
                "RequestWorkflowHistory",
                {"scheduled_seq": task["scheduled_seq"]},
                run_id=task["run_id"],
            )
            self.inst = None
            return
        cmds = inst.apply(task["events"], task["scheduled_seq"])
        self.inst = inst
        self.h.send(
            task["workflow_id"],
            "RespondWorkflowTaskCompleted",
            {"scheduled_seq": task["scheduled_seq"], "commands": cmds},
            run_id=task["run_id"],
        )

    def complete_activity(self, task, value=None):
        value = conv.from_bytes(task["input"])[0] if value is None else value
        result = conv.to_bytes(value)
        self._ids += 1
        rid = f"req-{self._ids}"
        body = {
            "activity_id": task["activity_id"],
            "scheduled_seq": task["scheduled_seq"],
            "attempt": task["attempt"],
            "result": result,
            "eager_workflow_task": None,
        }
        inst = self.inst
        if self.eager and inst is not None and inst.info.run_id == task["run_id"] and inst.can_run_eager():
            follows, at, cmds = inst.run_eager(
                task["activity_id"], task["scheduled_seq"], task["attempt"], result, self.clock(), rid
            )
            body["eager_workflow_task"] = {**follows, "workflow_time_ms": at, "commands": cmds, "build_id": None}
            self.eager_sent += 1
            if inst.closed:
                self.inst = None
        out = self.h.send(
            task["workflow_id"], "RespondActivityTaskCompleted", body, run_id=task["run_id"], request_id=rid
        )
        self.accepted += out.eager_accepted
        self.refused_by_engine += out.eager_refused
        return out

    def run(self):
        progressed = True
        while progressed:
            progressed = False
            for task in self.h.take_tasks("workflow"):
                progressed = True
                self.workflow_task(task)
            for task in self.h.take_tasks("activity"):
                progressed = True
                self.complete_activity(task)

    def kinds(self):
        return [e["attributes"][0] for e in self.h.events]

    def state(self):
        return self.h.store.get_state("wf")

    def replay(self):
        """A fresh instance replays the recorded history and agrees with every recorded command."""
        d = self.cls.__kadence_workflow__
        run_id = self.h.events[0]["run_id"]
        inst = WorkflowInstance(d, WorkflowInfo("wf", run_id, d.name, "q"), conv)
        inst.apply(self.h.events, scheduled_seq=-1)
        inst.finish_replay()
        return inst


def _started(cls, *args):
    """A driver whose workflow ran its first workflow task, and the activity tasks it scheduled."""
    driver = EagerDriver(cls)
    driver.h.start("wf", cls.__name__, list(args))
    driver.workflow_task(driver.h.take_tasks("workflow")[0])
    return driver, driver.h.take_tasks("activity")


def _signal(driver, name):
    driver.h.send(
        "wf",
        "SignalWorkflow",
        {"signal_name": name, "input": conv.to_bytes([]), "identity": "t", "start": None},
        request_id=f"sig-{name}",
    )


def _result(driver):
    st = driver.state()
    assert st["status"] == "completed", st["status"]
    return conv.from_bytes(st["result"])


def test_a_chain_of_activities_needs_one_workflow_task_through_the_engine():
    eager = EagerDriver(Chain)
    eager.h.start("wf", "Chain", [0])
    eager.run()
    plain = EagerDriver(Chain, eager=False)
    plain.h.start("wf", "Chain", [0])
    plain.run()
    assert _result(eager) == _result(plain) == 3
    # only the start's workflow task went through Kafka; each result carried the next task
    assert (eager.workflow_tasks, eager.eager_sent, eager.accepted) == (1, 3, 3)
    assert plain.workflow_tasks == 4
    # the history is the one ordinary workflow tasks leave (event for event, same kinds)
    assert eager.kinds() == plain.kinds()
    assert [e["seq"] for e in eager.h.events] == list(range(1, len(eager.h.events) + 1))
    eager.replay()


def test_the_recorded_workflow_time_is_the_time_the_code_ran_with():
    ticks = iter(range(now_ms() + 1000, now_ms() + 10_000, 1234))  # a worker clock a little ahead
    driver = EagerDriver(Timestamps, clock=lambda: next(ticks))
    driver.h.start("wf", "Timestamps", [])
    driver.run()
    assert driver.accepted == 2
    times = _result(driver)
    scheduled = [e for e in driver.h.events if e["attributes"][0] == "WorkflowTaskScheduled"]
    assert [t * 1000 for t in times] == [e["timestamp_ms"] for e in scheduled]
    assert driver.replay().closed


def test_an_event_between_refuses_the_eager_task_and_the_next_task_has_the_whole_history():
    driver, [first] = _started(Listener)
    _signal(driver, "ping")  # while the activity runs: the engine schedules a workflow task for it
    [signal_task] = driver.h.take_tasks("workflow")
    # the activity's result comes before the worker saw that task: its eager task ran on a
    # history without the signal, so the engine records the result alone
    out = driver.complete_activity(first)
    assert (out.eager_accepted, out.eager_refused) == (0, 1)
    assert driver.kinds()[-3:] == ["WorkflowSignaled", "WorkflowTaskScheduled", "ActivityTaskCompleted"]
    assert driver.state()["wt_needed"]  # a task follows the pending one
    # the signal's task does not confirm the instance's eager task: it is thrown away and rebuilt
    driver.workflow_task(signal_task)
    driver.run()
    assert driver.refused == 1
    assert _result(driver) == [1, 2, 1]
    driver.replay()


def test_a_refused_eager_task_is_followed_by_a_full_history_task_when_none_was_pending():
    driver, [task] = _started(Chain, 0)
    # the engine moved on meanwhile: say, its last completed task is not the one the instance knows
    st = driver.state()
    driver.h.store._states["wf"] = {**st, "wt_last_completed_seq": st["wt_last_completed_seq"] - 1}
    out = driver.complete_activity(task)
    assert out.eager_refused == 1
    [full] = driver.h.take_tasks("workflow")
    assert full["full_history"] and full["events"][0]["seq"] == 1
    driver.workflow_task(full)
    driver.run()
    assert _result(driver) == 3 and driver.refused == 1


def test_a_worker_clock_far_from_the_engine_refuses_the_eager_task():
    driver = EagerDriver(Chain, clock=lambda: now_ms() + EAGER_MAX_SKEW_MS + 60_000)
    driver.h.start("wf", "Chain", [0])
    driver.run()
    assert driver.accepted == 0 and driver.refused_by_engine == 3
    assert _result(driver) == 3
    driver.replay()


def test_eager_tasks_follow_each_other_before_the_engine_confirms_one():
    driver = EagerDriver(Pair)
    driver.h.start("wf", "Pair", [])
    driver.run()
    assert _result(driver) == 3
    # the first result ran an eager task (no new command: the code still waits for the second);
    # the second ran one after it, unconfirmed as it was, naming it as its base
    assert (driver.eager_sent, driver.accepted, driver.refused, driver.workflow_tasks) == (2, 2, 0, 1)
    driver.replay()


def test_an_eager_task_that_follows_a_refused_one_is_refused_too():
    driver, (first, second) = _started(Pair)
    _signal(driver, "nothing")
    signal_task = driver.h.take_tasks("workflow")
    assert driver.complete_activity(first).eager_refused == 1
    assert driver.complete_activity(second).eager_refused == 1
    for task in signal_task:
        driver.workflow_task(task)
    driver.run()
    assert _result(driver) == 3 and driver.accepted == 0
    driver.replay()


def test_a_duplicate_completion_with_an_eager_task_changes_nothing():
    driver, [task] = _started(Chain, 0)
    body = {
        "activity_id": task["activity_id"],
        "scheduled_seq": task["scheduled_seq"],
        "attempt": task["attempt"],
        "result": conv.to_bytes(1),
        "eager_workflow_task": None,
    }
    inst = driver.inst
    follows, at, cmds = inst.run_eager(
        task["activity_id"], task["scheduled_seq"], task["attempt"], body["result"], now_ms(), "rid-1"
    )
    body["eager_workflow_task"] = {**follows, "workflow_time_ms": at, "commands": cmds, "build_id": None}
    first = driver.h.send("wf", "RespondActivityTaskCompleted", body, run_id=task["run_id"], request_id="rid-1")
    events = len(driver.h.events)
    again = driver.h.send("wf", "RespondActivityTaskCompleted", body, run_id=task["run_id"], request_id="rid-1")
    assert first.eager_accepted == 1
    assert (again.eager_accepted, again.eager_refused, again.stale) == (0, 0, 1)
    assert len(driver.h.events) == events


def test_a_paused_run_refuses_an_eager_task_and_its_unpause_sends_the_whole_history():
    driver, [task] = _started(Chain, 0)
    driver.h.send("wf", "PauseWorkflow", {"reason": "", "identity": "t"}, request_id="pause")
    out = driver.complete_activity(task)
    assert (out.eager_accepted, out.eager_refused) == (0, 1)
    assert not driver.h.take_tasks("workflow") and not driver.h.take_tasks("activity")
    driver.h.send("wf", "UnpauseWorkflow", {"reason": "", "identity": "t"}, request_id="unpause")
    [full] = driver.h.take_tasks("workflow")
    assert full["full_history"]
    driver.workflow_task(full)
    driver.run()
    assert _result(driver) == 3
    driver.replay()
