"""A workflow task that closes the run while signals were recorded after it was scheduled (the
code never saw them): a complete is refused and a new task with the whole history lets the code
handle them (Temporal's UnhandledCommand); a continue-as-new goes ahead and the next run receives
them, with their request IDs (a retried signal is still recognised). Before, the run closed and
the acknowledged signals were in its history only: lost to the code."""

from __future__ import annotations

from kadence import workflow
from kadence._instance import WorkflowInfo, WorkflowInstance
from kadence.topics.payload import JsonConverter

from .engine_harness import Harness

conv = JsonConverter()


@workflow.defn
class Ender:
    def __init__(self) -> None:
        self.got: list[str] = []

    @workflow.signal
    def note(self, text: str) -> None:
        self.got.append(text)

    @workflow.update
    def add(self, text: str) -> int:
        self.got.append(text)
        return len(self.got)

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: bool(self.got))
        return self.got


@workflow.defn
class Roller:
    def __init__(self) -> None:
        self.got: list[str] = []

    @workflow.signal
    def note(self, text: str) -> None:
        self.got.append(text)

    @workflow.run
    async def run(self, generation: int) -> list[str]:
        await workflow.wait_condition(lambda: bool(self.got))
        if generation == 0:
            workflow.continue_as_new(1)
        return [f"gen{generation}", *self.got]


def _instance(cls, task) -> WorkflowInstance:
    d = cls.__kadence_workflow__
    return WorkflowInstance(d, WorkflowInfo(task["workflow_id"], task["run_id"], d.name, "q"), conv)


def _complete(h: Harness, task, commands) -> None:
    h.send(
        task["workflow_id"],
        "RespondWorkflowTaskCompleted",
        {"scheduled_seq": task["scheduled_seq"], "commands": commands},
        run_id=task["run_id"],
    )


def _signal(h: Harness, text: str, request_id: str) -> None:
    h.send("wf", "SignalWorkflow", {"signal_name": "note", "input": conv.to_bytes([text])}, request_id=request_id)


def test_a_complete_with_a_signal_it_never_saw_is_refused_and_the_code_sees_the_signal():
    h = Harness()
    h.start("wf", "Ender", [])
    (first,) = h.take_tasks("workflow")
    inst = _instance(Ender, first)
    _complete(h, first, inst.apply(first["events"], first["scheduled_seq"]))
    _signal(h, "a", "s-a")
    (second,) = h.take_tasks("workflow")
    commands = inst.apply(second["events"], second["scheduled_seq"])
    assert [c for c, _ in commands] == ["CompleteWorkflowExecution"]
    _signal(h, "b", "s-b")  # while the worker runs the task that completes
    _complete(h, second, commands)
    st = h.store.get_state("wf")
    assert st["status"] == "running", "the run closed without the code seeing signal b"
    kinds = [e["attributes"][0] for e in h.events]
    assert kinds.count("WorkflowTaskCompleted") == 1  # nothing of the refused task is recorded
    (third,) = h.take_tasks("workflow")
    assert third["full_history"]
    again = _instance(Ender, third)
    commands = again.apply(third["events"], third["scheduled_seq"])
    _complete(h, third, commands)
    st = h.store.get_state("wf")
    assert st["status"] == "completed" and conv.from_bytes(st["result"]) == ["a", "b"]


def test_a_continue_as_new_passes_the_signals_it_never_saw_to_the_next_run():
    h = Harness()
    h.start("wf", "Roller", [0])
    (first,) = h.take_tasks("workflow")
    inst = _instance(Roller, first)
    _complete(h, first, inst.apply(first["events"], first["scheduled_seq"]))
    _signal(h, "a", "s-a")
    (second,) = h.take_tasks("workflow")
    commands = inst.apply(second["events"], second["scheduled_seq"])
    assert [c for c, _ in commands] == ["ContinueAsNewWorkflowExecution"]
    _signal(h, "b", "s-b")
    _complete(h, second, commands)
    st = h.store.get_state("wf")
    old_run = first["run_id"]
    assert st["run_id"] != old_run and st["status"] == "running"
    new_signals = [e for e in h.events if e["run_id"] == st["run_id"] and e["attributes"][0] == "WorkflowSignaled"]
    assert [e["request_id"] for e in new_signals] == ["s-b"]
    _signal(h, "b", "s-b")  # the client retries it: the same signal, recorded once
    assert [
        e["request_id"] for e in h.events if e["run_id"] == st["run_id"] and e["attributes"][0] == "WorkflowSignaled"
    ] == ["s-b"]
    # the new run's code gets it
    nxt = _instance(Roller, {"workflow_id": "wf", "run_id": st["run_id"]})
    while st["status"] == "running":
        tasks = h.take_tasks("workflow")
        assert tasks, "the new run waits for a task that never comes"
        for task in tasks:
            _complete(h, task, nxt.apply(task["events"], task["scheduled_seq"]))
        st = h.store.get_state("wf")
    assert st["status"] == "completed" and conv.from_bytes(st["result"]) == ["gen1", "b"]


def test_a_closing_task_with_an_update_it_never_saw_is_refused_and_the_update_answered():
    h = Harness()
    h.start("wf", "Ender", [])
    (first,) = h.take_tasks("workflow")
    inst = _instance(Ender, first)
    _complete(h, first, inst.apply(first["events"], first["scheduled_seq"]))
    _signal(h, "a", "s-a")
    (second,) = h.take_tasks("workflow")
    commands = inst.apply(second["events"], second["scheduled_seq"])
    assert [c for c, _ in commands] == ["CompleteWorkflowExecution"]
    # a worker validated an update meanwhile: the engine records it (its sender waits for the answer)
    h.send(
        "wf",
        "AcceptWorkflowUpdate",
        {"update_name": "add", "input": conv.to_bytes(["u"]), "identity": "w"},
        request_id="u-1",
        run_id=first["run_id"],
    )
    _complete(h, second, commands)
    assert h.store.get_state("wf")["status"] == "running"  # refused: the update would fail unanswered
    (third,) = h.take_tasks("workflow")
    again = _instance(Ender, third)
    _complete(h, third, again.apply(third["events"], third["scheduled_seq"]))
    st = h.store.get_state("wf")
    assert st["status"] == "completed" and conv.from_bytes(st["result"]) == ["a", "u"]
    answers = [r for r in h.replies if r["request_id"] == "u-1"]
    assert answers and answers[-1]["status"] == "ok" and conv.from_bytes(answers[-1]["result"]) == 2
