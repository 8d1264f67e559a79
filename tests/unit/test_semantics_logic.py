"""Timers, signals, retries, cancellation and continue-as-new: state machine and replay agree
(pure logic, in memory; the integration tests show the same on a real broker)."""

import asyncio
from datetime import timedelta

import pytest

from kadence import ActivityError, RetryPolicy, activity, workflow
from kadence._instance import WorkflowInfo, WorkflowInstance
from kadence.topics.payload import JsonConverter

from .engine_harness import Driver

conv = JsonConverter()


@activity.defn
async def flaky(x):
    return x


@workflow.defn
class Sleeper:
    @workflow.run
    async def run(self, seconds):
        await workflow.sleep(seconds)
        await asyncio.sleep(seconds)
        return "woke"


@workflow.defn
class Signals:
    def __init__(self):
        self.got = []

    @workflow.signal
    def add(self, item):
        self.got.append(item)

    @workflow.query
    def items(self):
        return list(self.got)

    @workflow.run
    async def run(self, n):
        try:
            await workflow.wait_condition(lambda: len(self.got) >= n, timeout=60)
        except TimeoutError:
            return {"timeout": self.got}
        return self.got


@workflow.defn
class Retrying:
    @workflow.run
    async def run(self):
        try:
            return await workflow.execute_activity(
                flaky, 1, retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=3)
            )
        except ActivityError as err:
            return f"gave up: {err.__cause__}"


@workflow.defn
class Compensating:
    @workflow.run
    async def run(self):
        try:
            await workflow.execute_activity(flaky, "charge")
            await workflow.sleep(3600)
        except asyncio.CancelledError:
            await workflow.execute_activity(flaky, "refund")
            raise
        return "done"


@workflow.defn
class Looping:
    @workflow.run
    async def run(self, i, total):
        if i < 3:
            workflow.continue_as_new(i + 1, total + i)
        return total + i


def _replay_all(driver):
    """A fresh instance replays every run's history without a non-determinism error."""
    runs = {}
    for e in driver.h.events:
        runs.setdefault(e["run_id"], []).append(e)
    for run_id, events in runs.items():
        d = driver.cls.__kadence_workflow__
        WorkflowInstance(d, WorkflowInfo("wf", run_id, d.name, "q"), conv).apply(events, scheduled_seq=-1)


def test_durable_sleep_records_timers_and_fires_once():
    d = Driver(Sleeper)
    d.h.start("wf", "Sleeper", [5])
    d.run()
    assert conv.from_bytes(d.state()["result"]) == "woke"
    assert d.kinds().count("TimerStarted") == 2 and d.kinds().count("TimerFired") == 2
    # a timer that fires twice changes nothing
    n = len(d.h.events)
    d.h.send("wf", "FireTimer", {"timer_id": "1", "fire_at_ms": 0, "kind": "user"}, run_id=d.state()["run_id"])
    assert len(d.h.events) == n
    _replay_all(d)


def test_signals_are_recorded_in_order_and_deduplicated():
    d = Driver(Signals)
    d.h.start("wf", "Signals", [3])
    d.run(fire_timers=False)
    for _i, rid in enumerate(["s1", "s2", "s2", "s3"]):
        d.h.send("wf", "SignalWorkflow", {"signal_name": "add", "input": conv.to_bytes([rid])}, request_id=rid)
    d.run(fire_timers=False)
    assert conv.from_bytes(d.state()["result"]) == ["s1", "s2", "s3"]
    assert d.kinds().count("WorkflowSignaled") == 3
    _replay_all(d)


def test_wait_condition_times_out_with_a_durable_timer():
    d = Driver(Signals)
    d.h.start("wf", "Signals", [2])
    d.run(fire_timers=False)
    d.h.send("wf", "SignalWorkflow", {"signal_name": "add", "input": conv.to_bytes(["only"])}, request_id="a")
    d.run()
    assert conv.from_bytes(d.state()["result"]) == {"timeout": ["only"]}
    _replay_all(d)


def test_signal_with_start_starts_then_signals():
    d = Driver(Signals)
    start = {"workflow_type": "Signals", "task_queue": "q", "input": conv.to_bytes([1])}
    d.h.send(
        "wf", "SignalWorkflow", {"signal_name": "add", "input": conv.to_bytes(["x"]), "start": start}, request_id="sws"
    )
    d.run(fire_timers=False)
    assert conv.from_bytes(d.state()["result"]) == ["x"]
    assert d.kinds()[:3] == ["WorkflowExecutionStarted", "WorkflowTaskScheduled", "WorkflowSignaled"]


def test_activity_retries_then_succeeds_with_one_result():
    attempts = []

    def act(task, args):
        attempts.append(task["attempt"])
        return ("fail", "transient") if task["attempt"] < 3 else ("ok", "paid")

    d = Driver(Retrying, act)
    d.h.start("wf", "Retrying", [])
    d.run()
    assert attempts == [1, 2, 3]
    assert conv.from_bytes(d.state()["result"]) == "paid"
    assert d.kinds().count("ActivityTaskAttemptFailed") == 2 and d.kinds().count("ActivityTaskCompleted") == 1
    delays = [
        e["attributes"][1]["retry_in_ms"] for e in d.h.events if e["attributes"][0] == "ActivityTaskAttemptFailed"
    ]
    assert delays == [100, 200]
    _replay_all(d)


def test_activity_gives_up_after_maximum_attempts():
    d = Driver(Retrying, lambda task, args: ("fail", "down"))
    d.h.start("wf", "Retrying", [])
    d.run()
    assert conv.from_bytes(d.state()["result"]).startswith("gave up")
    assert d.kinds().count("ActivityTaskFailed") == 1 and d.kinds().count("ActivityTaskAttemptFailed") == 2


def test_late_completion_of_a_timed_out_attempt_is_rejected():
    seen = []
    d = Driver(Retrying, lambda task, args: (seen.append(task), ("hold", None))[1])
    d.h.start("wf", "Retrying", [])
    d.run(fire_timers=False)
    [task] = seen
    # attempt 1 fails (as a timeout would), then its completion arrives late
    common = {"activity_id": task["activity_id"], "scheduled_seq": task["scheduled_seq"], "attempt": 1}
    d.h.send(
        "wf", "RespondActivityTaskFailed", {**common, "failure": {"type": "X", "message": "m"}}, run_id=task["run_id"]
    )
    out = d.h.send("wf", "RespondActivityTaskCompleted", {**common, "result": b"1"}, run_id=task["run_id"])
    assert out.stale == 1 and d.kinds().count("ActivityTaskCompleted") == 0
    assert d.kinds().count("ActivityTaskAttemptFailed") == 1


def test_cancellation_runs_compensation_and_ends_canceled():
    d = Driver(Compensating)
    d.h.start("wf", "Compensating", [])
    d.run(fire_timers=False)
    d.h.send("wf", "RequestCancelWorkflow", {"reason": "customer"}, request_id="c1")
    d.h.send("wf", "RequestCancelWorkflow", {"reason": "again"}, request_id="c2")
    d.run(fire_timers=False)
    st = d.state()
    assert st["status"] == "canceled"
    kinds = d.kinds()
    assert kinds.count("WorkflowCancelRequested") == 1 and "TimerCanceled" in kinds
    assert kinds[-1] == "WorkflowExecutionCanceled"
    inputs = [
        conv.from_bytes(e["attributes"][1]["input"])
        for e in d.h.events
        if e["attributes"][0] == "ActivityTaskScheduled"
    ]
    assert inputs == [["charge"], ["refund"]]
    _replay_all(d)


def test_terminate_ends_the_run_at_once_and_is_idempotent():
    d = Driver(Compensating)
    d.h.start("wf", "Compensating", [])
    d.run(fire_timers=False)
    d.h.send("wf", "TerminateWorkflow", {"reason": "ops"}, request_id="t1")
    d.h.send("wf", "TerminateWorkflow", {"reason": "ops"}, request_id="t1")
    assert d.state()["status"] == "terminated"
    assert d.kinds().count("WorkflowExecutionTerminated") == 1
    assert [r["status"] for r in d.h.replies if r["request_id"] == "t1"] == ["ok", "ok"]


def test_continue_as_new_chains_runs_and_result_waiters_follow():
    d = Driver(Looping)
    d.h.start("wf", "Looping", [0, 0])
    d.h.send("wf", "AwaitWorkflowResult", {"wait": True}, request_id="w")
    d.run()
    assert conv.from_bytes(d.state()["result"]) == 6
    runs = {e["run_id"] for e in d.h.events}
    assert len(runs) == 4
    [answer] = [r for r in d.h.replies if r["request_id"] == "w"]
    assert answer["status"] == "completed" and conv.from_bytes(answer["result"]) == 6
    _replay_all(d)


@workflow.defn
class Chatty:
    @workflow.run
    async def run(self, n):
        for i in range(n):
            await workflow.execute_activity(flaky, i)
        return n


def test_history_cap_warns_then_fails_pointing_at_continue_as_new(monkeypatch):
    from kadence.processors import state_machine

    monkeypatch.setattr(state_machine, "HISTORY_WARN_EVENTS", 20)
    monkeypatch.setattr(state_machine, "HISTORY_LIMIT_EVENTS", 40)
    d = Driver(Chatty)
    d.h.start("wf", "Chatty", [100])
    warnings = []
    monkeypatch.setattr(state_machine.log, "warning", lambda msg, *args: warnings.append(msg % args))
    d.run(fire_timers=False)
    st = d.state()
    assert st["status"] == "failed"
    assert st["failure"]["type"] == "HistoryLimitExceeded" and "continue_as_new" in st["failure"]["message"]
    assert len(d.h.events) <= 45
    assert sum("consider workflow.continue_as_new" in w for w in warnings) == 1 and st["history_warned"]


def test_run_and_execution_timeouts_close_the_workflow():
    d = Driver(Sleeper)
    start = {"workflow_type": "Sleeper", "task_queue": "q", "input": conv.to_bytes([3600]), "run_timeout_ms": 1000}
    d.h.send("wf", "StartWorkflow", start, request_id="r")
    d.run()
    assert d.state()["status"] == "timed_out" and d.kinds()[-1] == "WorkflowExecutionTimedOut"
    # the execution timeout spans continue-as-new: it is re-armed for every run of the chain
    d2 = Driver(Looping)
    d2.h.send(
        "wf",
        "StartWorkflow",
        {"workflow_type": "Looping", "task_queue": "q", "input": conv.to_bytes([0, 0]), "execution_timeout_ms": 60_000},
        request_id="r",
    )
    d2.run(fire_timers=False)
    exec_timers = [t for t in d2.h.timers if t["kind"] == "execution_timeout"]
    assert len(exec_timers) == 4 and len({t["fire_at_ms"] for t in exec_timers}) == 1
    assert d2.state()["status"] == "completed"


@workflow.defn
class Naughty:
    @workflow.run
    async def run(self):
        import time

        time.sleep(0.01)
        return "slept"


def test_blocking_calls_in_workflow_code_fail_the_task_with_an_explanation():
    from kadence import NotDeterministicError
    from kadence._loop import install_guard

    install_guard()
    d = Driver(Naughty)
    d.h.start("wf", "Naughty", [])
    with pytest.raises(NotDeterministicError, match=r"'time.sleep'.*workflow.sleep"):
        d.step()
    assert d.state()["status"] == "running"
    import time

    time.sleep(0.001)  # outside workflow code the guard does nothing


@workflow.defn(failure_exception_types=[ValueError])  # a ValueError fails the run, not its task
class Child:
    @workflow.run
    async def run(self, x):
        if x < 0:
            raise ValueError("negative")
        return x * 10


@workflow.defn
class Parent:
    @workflow.run
    async def run(self, xs):
        results = await asyncio.gather(*(workflow.execute_child_workflow(Child, x) for x in xs), return_exceptions=True)
        return [r if not isinstance(r, Exception) else f"error: {r.__cause__}" for r in results]


class Family(Driver):
    """Routes commands produced for other workflows (children, parent notifications) back in."""

    def __init__(self):
        super().__init__(Parent)
        self.instances = {}

    def step(self):
        progressed = False
        for task in self.h.take_tasks("workflow"):
            progressed = True
            cls = Parent if task["workflow_type"] == "Parent" else Child
            inst = self.instances.get(task["workflow_id"])
            if inst is None or task["full_history"] or inst.info.run_id != task["run_id"]:
                d = cls.__kadence_workflow__
                inst = WorkflowInstance(d, WorkflowInfo(task["workflow_id"], task["run_id"], d.name, "q"), conv)
                self.instances[task["workflow_id"]] = inst
            cmds = inst.apply(task["events"], task["scheduled_seq"])
            out = self.h.send(
                task["workflow_id"],
                "RespondWorkflowTaskCompleted",
                {"scheduled_seq": task["scheduled_seq"], "commands": cmds},
                run_id=task["run_id"],
            )
            self._route(out)
        return progressed

    def _route(self, out):
        for wf, btype, body, run_id, rid, _trace in list(out.commands):
            self._route(self.h.send(wf, btype, body, run_id=run_id, request_id=rid))


def test_children_start_on_their_own_and_report_back_to_the_parent():
    f = Family()
    f._route(f.h.start("parent", "Parent", [[1, 2, -3]]))
    f.run(fire_timers=False)
    st = f.h.store.get_state("parent")
    assert conv.from_bytes(st["result"]) == [10, 20, "error: negative"]
    kinds = [e["attributes"][0] for e in f.h.events if e["aggregate_key"] == "parent"]
    assert (
        kinds.count("StartChildWorkflowExecutionInitiated") == 3 and kinds.count("ChildWorkflowExecutionStarted") == 3
    )
    assert kinds.count("ChildWorkflowExecutionCompleted") == 2 and kinds.count("ChildWorkflowExecutionFailed") == 1
    child = f.h.store.get_state("parent/child-1")
    assert child["parent_workflow_id"] == "parent" and child["status"] == "completed"
    parent_events = [e for e in f.h.events if e["aggregate_key"] == "parent"]
    assert Replayer_ok(parent_events)


def Replayer_ok(events):
    from kadence import Replayer

    return Replayer(workflows=[Parent]).replay(events).ok


def test_parent_close_policy_terminates_open_children():
    f = Family()
    f._route(f.h.start("parent", "Parent", [[1]]))
    # deliver only the parent's first task: the child start is produced but the child never runs
    [task] = f.h.take_tasks("workflow")
    inst = WorkflowInstance(Parent.__kadence_workflow__, WorkflowInfo("parent", task["run_id"], "Parent", "q"), conv)
    cmds = inst.apply(task["events"], task["scheduled_seq"])
    out = f.h.send(
        "parent",
        "RespondWorkflowTaskCompleted",
        {"scheduled_seq": task["scheduled_seq"], "commands": cmds},
        run_id=task["run_id"],
    )
    f._route(out)  # the child starts (its task stays undelivered)
    f.h.take_tasks("workflow")
    f._route(f.h.send("parent", "TerminateWorkflow", {"reason": "ops"}, request_id="t"))
    assert f.h.store.get_state("parent/child-1")["status"] == "terminated"


@workflow.defn
class Bounded:
    @workflow.run
    async def run(self):
        try:
            return await workflow.execute_activity(
                flaky,
                1,
                schedule_to_close_timeout=timedelta(seconds=5),
                retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1)),
            )
        except ActivityError as err:
            return f"{err}"


def test_schedule_to_close_bounds_all_attempts_together():
    d = Driver(Bounded, lambda task, args: ("fail", "down"))
    d.h.start("wf", "Bounded", [])
    d.run(fire_timers=False)  # attempt 1 failed; a retry timer and the schedule-to-close deadline are pending
    assert {t["kind"] for t in d.h.timers} == {"retry_backoff"}  # durable timer (timer service)
    assert {t["kind"] for t in d.h.deadlines()} == {"schedule_to_close"}  # the processor's deadline index
    deadline = next(t for t in d.h.deadlines() if t["kind"] == "schedule_to_close")
    d.h.timers = []  # the deadline comes first (the retry would start after it)
    d.h.fire_timers(until_ms=deadline["fire_at_ms"])
    d.run(fire_timers=False)
    assert "timed out (schedule_to_close)" in conv.from_bytes(d.state()["result"])
    [timed_out] = [e for e in d.h.events if e["attributes"][0] == "ActivityTaskTimedOut"]
    assert timed_out["attributes"][1]["timeout_type"] == "schedule_to_close"


def test_a_retried_reset_gets_its_first_answer_and_resets_once():
    d = Driver(Sleeper)
    d.h.start("wf", "Sleeper", [60])
    d.run(fire_timers=False)
    done = [e["seq"] for e in d.h.events if e["attributes"][0] == "WorkflowTaskCompleted"][-1]
    first = d.h.send(
        "wf", "ResetWorkflow", {"workflow_task_completed_seq": done}, request_id="reset-1", run_id=d.state()["run_id"]
    )
    again = d.h.send(
        "wf",
        "ResetWorkflow",
        {"workflow_task_completed_seq": done},
        request_id="reset-1",
        run_id=first.replies[0]["run_id"],
    )
    # the same answer (the new run); the plan of what it did comes with the first answer only
    assert first.replies[0]["status"] == "ok" and first.replies[0]["reset_plan"]["branch_event"] == done
    assert again.replies[0] == {**first.replies[0], "reset_plan": None}
    assert again.duplicates == 1 and not again.events
    assert sum(e["attributes"][0] == "WorkflowExecutionTerminated" for e in d.h.events) == 1


def test_a_started_child_event_without_its_run_is_stale_and_records_nothing():
    """A child's "started" names its run (the engine sends it with the run it started); one that
    does not is dropped as stale, where it failed the batch at commit (the event's run_id is
    required)."""
    f = Family()
    f.h.start("parent", "Parent", [[1]])
    (task,) = f.h.take_tasks("workflow")
    d = Parent.__kadence_workflow__
    inst = WorkflowInstance(d, WorkflowInfo(task["workflow_id"], task["run_id"], d.name, "q"), conv)
    out = f.h.send(
        "parent",
        "RespondWorkflowTaskCompleted",
        {"scheduled_seq": task["scheduled_seq"], "commands": inst.apply(task["events"], task["scheduled_seq"])},
        run_id=task["run_id"],
    )  # the child's StartWorkflow (in out.commands) is not delivered: the child is pending
    (child,) = f.h.store.get_state("parent")["pending_children"]
    assert child["run_id"] is None and any(btype == "StartWorkflow" for _, btype, *_ in out.commands)
    before = len(f.h.events)
    out = f.h.send(
        "parent",
        "ChildWorkflowEvent",
        {"initiated_seq": child["initiated_seq"], "child_workflow_id": child["workflow_id"], "kind": "started"},
        run_id=task["run_id"],
    )
    assert out.stale == 1 and len(f.h.events) == before
    assert f.h.store.get_state("parent")["pending_children"][0]["run_id"] is None
