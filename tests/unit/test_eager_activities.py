"""Eager activities (decision 0054), the processor's side: an activity whose scheduling command
asks for it goes in the reply to the completion, not to the activity-task topic; one without a
timeout that would retry it (a worker dying with it) is dispatched through the topic; a stale
completion is answered with nothing, at once; a result whose eager workflow task asks for the
next activity gets it the same way."""

from __future__ import annotations

from datetime import timedelta

from kadence import workflow
from kadence._instance import WorkflowInfo, WorkflowInstance
from kadence.processors.activities import eager_requests
from kadence.topics.payload import JsonConverter

from .engine_harness import Harness

conv = JsonConverter()


@workflow.defn
class Two:
    @workflow.run
    async def run(self) -> list[int]:
        a = await workflow.execute_activity("double", 1, start_to_close_timeout=timedelta(seconds=5))
        b = await workflow.execute_activity("double", a, start_to_close_timeout=timedelta(seconds=5))
        c = await workflow.execute_activity("double", b)  # no timeout: never eager
        return [a, b, c]


def _asking(commands, *, only: int | None = None):
    out = []
    for i, (ctype, c) in enumerate(commands):
        if ctype == "ScheduleActivityTask" and (only is None or i == only):
            c = {**c, "request_eager_execution": True}
        out.append((ctype, c))
    return out


def _first(h: Harness):
    h.start("wf", "Two", [])
    (task,) = h.take_tasks("workflow")
    d = Two.__kadence_workflow__
    inst = WorkflowInstance(d, WorkflowInfo("wf", task["run_id"], d.name, "q"), conv)
    return task, inst, inst.apply(task["events"], task["scheduled_seq"])


def test_an_asked_activity_rides_in_the_reply_and_not_on_the_topic():
    h = Harness()
    task, _inst, commands = _first(h)
    out = h.send(
        "wf",
        "RespondWorkflowTaskCompleted",
        {"scheduled_seq": task["scheduled_seq"], "commands": _asking(commands)},
        run_id=task["run_id"],
        request_id="c1",
    )
    assert [k for k, _q, _t in out.tasks] == ["eager"]
    assert h.take_tasks("activity") == []
    (reply,) = [r for r in out.replies if r["request_id"] == "c1"]
    (sent,) = reply["activity_tasks"]
    assert (sent["activity_type"], sent["attempt"], sent["start_to_close_timeout_ms"]) == ("double", 1, 5000)
    assert out.eager_activities == 1
    # recorded as any scheduling is
    assert h.events[-1]["attributes"][0] == "ActivityTaskScheduled"


def test_an_activity_not_asked_for_goes_to_the_topic_and_no_reply_is_written():
    h = Harness()
    task, _inst, commands = _first(h)
    out = h.send(
        "wf",
        "RespondWorkflowTaskCompleted",
        {"scheduled_seq": task["scheduled_seq"], "commands": commands},
        run_id=task["run_id"],
        request_id="c1",
    )
    assert [k for k, _q, _t in out.tasks] == ["activity"]
    assert out.replies == [] and out.eager_activities == 0


def test_a_stale_completion_that_asked_is_answered_with_nothing():
    h = Harness()
    task, _inst, commands = _first(h)
    body = {"scheduled_seq": task["scheduled_seq"], "commands": _asking(commands)}
    h.send("wf", "RespondWorkflowTaskCompleted", body, run_id=task["run_id"], request_id="c1")
    again = h.send("wf", "RespondWorkflowTaskCompleted", body, run_id=task["run_id"], request_id="c2")
    assert again.tasks == [] and again.stale == 1
    assert [(r["request_id"], r["activity_tasks"]) for r in again.replies] == [("c2", [])]


def test_an_activity_without_a_retrying_timeout_is_never_eager():
    h = Harness()
    task, inst, commands = _first(h)
    h.send(
        "wf",
        "RespondWorkflowTaskCompleted",
        {"scheduled_seq": task["scheduled_seq"], "commands": _asking(commands)},
        run_id=task["run_id"],
        request_id="c1",
    )
    (_kind, _q, first) = h.tasks.pop()
    # the result of the first, the second (with a timeout) asked for through the eager task's
    # path is tested end to end on the broker; here: the third, asked for, has no timeout
    for n, timeout in ((2, True), (4, False)):
        h.send(
            "wf",
            "RespondActivityTaskCompleted",
            {
                "activity_id": first["activity_id"],
                "scheduled_seq": first["scheduled_seq"],
                "attempt": 1,
                "result": conv.to_bytes(n),
            },
            run_id=task["run_id"],
        )
        (wt,) = h.take_tasks("workflow")
        cmds = inst.apply(wt["events"], wt["scheduled_seq"])
        assert eager_requests(_asking(cmds)) == {c["activity_id"] for t, c in cmds if t == "ScheduleActivityTask"}
        out = h.send(
            "wf",
            "RespondWorkflowTaskCompleted",
            {"scheduled_seq": wt["scheduled_seq"], "commands": _asking(cmds)},
            run_id=task["run_id"],
            request_id=f"c{n}",
        )
        (kind, _q, first) = out.tasks[-1]
        assert kind == ("eager" if timeout else "activity")
        (reply,) = out.replies
        assert len(reply["activity_tasks"]) == (1 if timeout else 0)
        h.tasks.clear()


# -- the worker's side: which activities it asks for, and its slots ---------------------------

import asyncio  # noqa: E402
import collections  # noqa: E402
import concurrent.futures as cf  # noqa: E402

from kadence._eager_activities import EagerActivities  # noqa: E402
from kadence._slots import Slots  # noqa: E402


class _Engine:
    def __init__(self):
        self.waiting: dict = {}

    def expect_reply(self, workflow_id, request_id):
        fut = cf.Future()
        self.waiting[request_id] = fut
        return fut

    def abandon(self, workflow_id, request_id):
        self.waiting.pop(request_id, None)


def _eager(engine, slots, start, stats) -> EagerActivities:
    """A worker's eager activities on queue q, running ``double``."""
    return EagerActivities(
        engine=engine,
        task_queue="q",
        activities={"double": object()},
        slots=slots,
        start=start,
        stats=stats,
        enabled=True,
    )


def _schedule(activity_id, *, queue="q", activity_type="double", timeout=5000):
    options = {"task_queue": queue, "start_to_close_timeout_ms": timeout, "heartbeat_timeout_ms": None}
    return ("ScheduleActivityTask", {"activity_id": activity_id, "activity_type": activity_type, "options": options})


async def test_a_worker_asks_only_for_what_it_runs_and_has_slots_for():
    slots, started, stats = Slots(2), [], collections.Counter()
    engine = _Engine()
    eager = _eager(engine, slots, started.append, stats)
    commands = [
        _schedule("other-queue", queue="elsewhere"),
        _schedule("unknown", activity_type="nope"),
        _schedule("no-timeout", timeout=None),
        _schedule("long", timeout=120_000),  # a lost attempt would wait two minutes: not asked for
        ("StartTimer", {"timer_id": "t"}),
        _schedule("a"),
        _schedule("b"),
        _schedule("c"),  # no slot left for it
    ]
    out = eager.ask("wf", "r1", commands)
    asked = [c["activity_id"] for t, c in out if t == "ScheduleActivityTask" and c.get("request_eager_execution")]
    assert asked == ["a", "b"] and slots.used == 2 and stats["eager_activities_asked"] == 2
    assert eager.ask("wf", "r2", [_schedule("d")])[0][1].get("request_eager_execution") is None  # none free
    # the engine sent one of the two: the other's slot comes back at once, the sent one's when it ends
    engine.waiting["r1"].set_result({"activity_tasks": [{"activity_id": "a"}]})
    for _ in range(5):
        await asyncio.sleep(0)
    assert started == [{"activity_id": "a"}] and slots.used == 1
    assert (stats["eager_activities"], stats["eager_activities_declined"]) == (1, 1)
    eager.done()
    assert slots.used == 0
    await eager.close()
    assert eager.ask("wf", "r3", [_schedule("e")])[0][1].get("request_eager_execution") is None  # closed


async def test_a_closing_worker_gives_back_the_slots_of_replies_still_awaited():
    slots = Slots(4)
    eager = _eager(_Engine(), slots, lambda task: None, collections.Counter())
    eager.ask("wf", "r1", [_schedule("a"), _schedule("b")])
    assert slots.used == 2
    await eager.close()
    assert slots.used == 0


async def test_a_late_reply_frees_the_slots_first_and_runs_what_finds_a_free_slot(monkeypatch):
    import kadence._eager_activities as eager_module

    monkeypatch.setattr(eager_module, "REPLY_WAIT_S", 0.05)
    slots, started, stats = Slots(2), [], collections.Counter()
    engine = _Engine()
    eager = _eager(engine, slots, started.append, stats)
    eager.ask("wf", "r1", [_schedule("a"), _schedule("b")])
    assert slots.used == 2
    await asyncio.sleep(0.2)  # no reply yet (a processor slowed by a failover): the slots are free again
    assert slots.used == 0 and "r1" in engine.waiting
    assert slots.take(1) == 1  # meanwhile another attempt took one
    engine.waiting["r1"].set_result({"activity_tasks": [{"activity_id": "a"}, {"activity_id": "b"}]})
    for _ in range(5):
        await asyncio.sleep(0)
    # one slot was free: one of the late attempts runs, the other is left to its timeout
    assert started == [{"activity_id": "a"}] and slots.used == 2
    assert (stats["eager_activities"], stats["eager_activities_declined"]) == (1, 1)
    await eager.close()
