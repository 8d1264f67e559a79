"""The workflow instance and the state machine agree on history, replay and non-determinism."""

import pytest

from kadence import NonDeterminismError, activity, workflow
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
            workflow.execute_activity(step, a + 1), workflow.execute_activity(step, a + 2))
        return [a, b, c]


@workflow.defn(name="Three")
class ThreeChanged:
    @workflow.run
    async def run(self, n):
        a = await workflow.execute_activity("other", n)
        return [a]


def _instance(defn_cls, task):
    d: WorkflowDefinition = defn_cls.__kadence_workflow__
    return WorkflowInstance(d, WorkflowInfo(task["workflow_id"], task["run_id"], d.name, "q"), conv)


def _drive(h: Harness, wf_cls, *, cache=True):
    """Run workflow and activity tasks until none is left; activities echo their input."""
    inst = None
    while h.tasks:
        for task in h.take_tasks("workflow"):
            if inst is None or not cache or task["full_history"]:
                if not task["full_history"]:
                    h.send(task["workflow_id"], "RequestWorkflowHistory", {"scheduled_seq": task["scheduled_seq"]},
                           run_id=task["run_id"])
                    continue
                inst = _instance(wf_cls, task)
            cmds = inst.apply(task["events"], task["scheduled_seq"])
            h.send(task["workflow_id"], "RespondWorkflowTaskCompleted",
                   {"scheduled_seq": task["scheduled_seq"], "commands": cmds}, run_id=task["run_id"])
            if not cache:
                inst = None
        for task in h.take_tasks("activity"):
            h.send(task["workflow_id"], "RespondActivityTaskCompleted", {
                "activity_id": task["activity_id"], "scheduled_seq": task["scheduled_seq"],
                "attempt": task["attempt"], "result": conv.to_bytes(conv.from_bytes(task["input"])[0])},
                run_id=task["run_id"])


@pytest.mark.parametrize("cache", [True, False])
def test_workflow_completes_with_and_without_sticky_cache(cache):
    h = Harness()
    h.start("wf-1", "Three", [5])
    _drive(h, Three, cache=cache)
    st = h.store.get_state("wf-1")
    assert st["status"] == "completed"
    assert conv.from_bytes(st["result"]) == [5, 6, 7]
    seqs = [e["seq"] for e in h.events]
    assert seqs == list(range(1, len(seqs) + 1))
    kinds = [e["attributes"][0] for e in h.events]
    assert kinds.count("ActivityTaskCompleted") == 3
    assert kinds[-1] == "WorkflowExecutionCompleted"


def test_full_replay_of_recorded_history_matches():
    h = Harness()
    h.start("wf-2", "Three", [1])
    _drive(h, Three)
    events = h.events
    # a fresh instance replays the whole history (ending with the completion) without error
    inst = _instance(Three, {"workflow_id": "wf-2", "run_id": events[0]["run_id"]})
    assert inst.apply(events, scheduled_seq=-1) == []
    assert inst.closed


def test_changed_code_is_detected_naming_the_event():
    h = Harness()
    h.start("wf-3", "Three", [1])
    _drive(h, Three)
    inst = _instance(ThreeChanged, {"workflow_id": "wf-3", "run_id": h.events[0]["run_id"]})
    with pytest.raises(NonDeterminismError, match=r"history event 4 is ActivityTaskScheduled\(activity_type='step'"):
        inst.apply(h.events, scheduled_seq=-1)


def test_duplicate_start_gets_first_answer_and_stale_completion_is_ignored():
    h = Harness()
    first = h.start("wf-4", "Three", [1], request_id="same")
    again = h.start("wf-4", "Three", [1], request_id="same")
    other = h.start("wf-4", "Three", [1], request_id="different")
    assert first.replies[0]["run_id"] == again.replies[0]["run_id"]
    assert again.replies[0]["status"] == "ok" and again.duplicates == 1
    assert other.replies[0]["status"] == "already_started"
    assert other.replies[0]["run_id"] == first.replies[0]["run_id"]
    n = len(h.events)
    out = h.send("wf-4", "RespondWorkflowTaskCompleted", {"scheduled_seq": 99, "commands": []},
                 run_id=first.replies[0]["run_id"])
    assert out.stale == 1 and len(h.events) == n


def test_discarding_a_cached_instance_silences_only_its_own_pending_tasks(caplog):
    import gc

    h = Harness()
    h.start("wf-d1", "Three", [1])
    task = h.take_tasks("workflow")[0]
    inst = _instance(Three, task)
    assert inst.apply(task["events"], task["scheduled_seq"])  # the first activity is scheduled
    pending = inst.loop.tasks()
    assert pending and not any(t.done() for t in pending)  # the run waits on its activity
    other = _instance(Three, task)
    other.apply(task["events"], task["scheduled_seq"])
    others = other.loop.tasks()
    inst.discard()
    assert all(t._log_destroy_pending is False for t in pending)
    assert all(t._log_destroy_pending is True for t in others)  # another instance's tasks untouched
    del inst, pending, task
    with caplog.at_level("ERROR", logger="asyncio"):
        gc.collect()
    assert "Task was destroyed but it is pending" not in caplog.text
    other.discard()
