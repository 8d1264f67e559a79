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
