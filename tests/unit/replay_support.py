"""The workflow the replay and codec tests drive through the state machine, and the driver."""

from __future__ import annotations

from kadence import activity, workflow
from kadence._definitions import WorkflowDefinition
from kadence._instance import WorkflowInfo, WorkflowInstance
from kadence.topics.payload import JsonConverter

from .engine_harness import Harness

conv = JsonConverter()


@activity.defn
async def step(x):
    return x


@workflow.defn
class Three:
    @workflow.run
    async def run(self, n):
        a = await workflow.execute_activity(step, n)
        b, c = await __import__("asyncio").gather(
            workflow.execute_activity(step, a + 1), workflow.execute_activity(step, a + 2)
        )
        return [a, b, c]


def instance_of(defn_cls, task):
    d: WorkflowDefinition = defn_cls.__kadence_workflow__
    return WorkflowInstance(d, WorkflowInfo(task["workflow_id"], task["run_id"], d.name, "q"), conv)


def drive(h: Harness, wf_cls, *, cache=True):
    """Run workflow and activity tasks until none is left; activities echo their input."""
    inst = None
    while h.tasks:
        for task in h.take_tasks("workflow"):
            if inst is None or not cache or task["full_history"]:
                if not task["full_history"]:
                    h.send(
                        task["workflow_id"],
                        "RequestWorkflowHistory",
                        {"scheduled_seq": task["scheduled_seq"]},
                        run_id=task["run_id"],
                    )
                    continue
                inst = instance_of(wf_cls, task)
            cmds = inst.apply(task["events"], task["scheduled_seq"])
            h.send(
                task["workflow_id"],
                "RespondWorkflowTaskCompleted",
                {"scheduled_seq": task["scheduled_seq"], "commands": cmds},
                run_id=task["run_id"],
            )
            if not cache:
                inst = None
        for task in h.take_tasks("activity"):
            h.send(
                task["workflow_id"],
                "RespondActivityTaskCompleted",
                {
                    "activity_id": task["activity_id"],
                    "scheduled_seq": task["scheduled_seq"],
                    "attempt": task["attempt"],
                    "result": conv.to_bytes(conv.from_bytes(task["input"])[0]),
                },
                run_id=task["run_id"],
            )
