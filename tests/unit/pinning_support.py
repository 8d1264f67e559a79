"""A workflow waiting for a signal, and a worker of one build answering its tasks (the build
pinning and workflow-task retry tests drive the state machine with them)."""

from __future__ import annotations

from kadence import workflow
from kadence._definitions import WorkflowDefinition
from kadence._instance import WorkflowInfo, WorkflowInstance
from kadence.topics.payload import JsonConverter

from .engine_harness import Harness

conv = JsonConverter()


@workflow.defn
class WaitGo:
    def __init__(self):
        self.got = None

    @workflow.signal
    def go(self, value):
        self.got = value

    @workflow.run
    async def run(self):
        await workflow.wait_condition(lambda: self.got is not None)
        return self.got


def answer(h: Harness, task: dict, build: str | None, cls=WaitGo):
    """A worker of ``build`` runs the task from its full history and responds."""
    d: WorkflowDefinition = cls.__kadence_workflow__
    inst = WorkflowInstance(d, WorkflowInfo(task["workflow_id"], task["run_id"], d.name, "q"), conv)
    assert task["full_history"]
    cmds = inst.apply(task["events"], task["scheduled_seq"])
    inst.discard()
    return h.send(
        task["workflow_id"],
        "RespondWorkflowTaskCompleted",
        {"scheduled_seq": task["scheduled_seq"], "commands": cmds, "build_id": build},
        run_id=task["run_id"],
    )


def one_workflow_task(h: Harness) -> dict:
    tasks = h.take_tasks("workflow")
    assert len(tasks) == 1, tasks
    return tasks[0]
