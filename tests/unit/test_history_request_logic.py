"""A worker that asks for a workflow's full history (restart, partition moved) gets the history
as of the task's WorkflowTaskScheduled event, even when events arrived after it.

Found by the chaos suite: a redelivered task whose history request was answered with later
events (an activity result, a signal) failed in the worker as a "history gap", the worker asked
again, and the workflow never progressed.
"""

from kadence import workflow
from kadence._instance import WorkflowInfo, WorkflowInstance
from kadence.topics.payload import JsonConverter

from .engine_harness import Harness

conv = JsonConverter()


@workflow.defn
class WaitsForTwo:
    def __init__(self):
        self.got = []

    @workflow.signal
    def add(self, item):
        self.got.append(item)

    @workflow.run
    async def run(self):
        await workflow.wait_condition(lambda: len(self.got) >= 2)
        return self.got


def _signal(h, item, rid):
    h.send(
        "wf",
        "SignalWorkflow",
        {"signal_name": "add", "input": conv.to_bytes([item]), "start": None, "identity": "t"},
        request_id=rid,
    )


def test_full_history_for_a_pending_task_ends_at_its_scheduled_event():
    h = Harness()
    h.start("wf", "WaitsForTwo", [])
    [first] = h.take_tasks("workflow")
    seq, run_id = first["scheduled_seq"], first["run_id"]
    _signal(h, "a", "s1")  # arrives while the task is pending (no new task yet)
    assert h.take_tasks("workflow") == []
    # a worker without the workflow cached asks for the full history of the pending task
    h.send("wf", "RequestWorkflowHistory", {"scheduled_seq": seq, "identity": "w"}, run_id=run_id)
    [full] = h.take_tasks("workflow")
    assert full["full_history"] and full["scheduled_seq"] == seq
    assert [e["seq"] for e in full["events"]] == list(range(1, seq + 1))

    d = WaitsForTwo.__kadence_workflow__
    inst = WorkflowInstance(d, WorkflowInfo("wf", run_id, d.name, "q"), conv)
    commands = inst.apply(full["events"], seq)
    assert inst.last_seq == seq
    h.send("wf", "RespondWorkflowTaskCompleted", {"scheduled_seq": seq, "commands": commands}, run_id=run_id)
    # the signal that arrived meanwhile comes in the next task, and the workflow goes on
    [nxt] = h.take_tasks("workflow")
    kinds = [e["attributes"][0] for e in nxt["events"]]
    assert "WorkflowSignaled" in kinds and nxt["scheduled_seq"] > seq
    inst.apply(nxt["events"], nxt["scheduled_seq"])
    assert inst.last_seq == nxt["scheduled_seq"]
