"""The workflow instance and the state machine agree on history, replay and non-determinism."""

import pytest

from kadence import NonDeterminismError, workflow

from .engine_harness import Harness
from .replay_support import Three, conv, drive, instance_of


@workflow.defn(name="Three")
class ThreeChanged:
    @workflow.run
    async def run(self, n):
        a = await workflow.execute_activity("other", n)
        return [a]


@pytest.mark.parametrize("cache", [True, False])
def test_workflow_completes_with_and_without_sticky_cache(cache):
    h = Harness()
    h.start("wf-1", "Three", [5])
    drive(h, Three, cache=cache)
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
    drive(h, Three)
    events = h.events
    # a fresh instance replays the whole history (ending with the completion) without error
    inst = instance_of(Three, {"workflow_id": "wf-2", "run_id": events[0]["run_id"]})
    assert inst.apply(events, scheduled_seq=-1) == []
    assert inst.closed


def test_changed_code_is_detected_naming_the_event():
    h = Harness()
    h.start("wf-3", "Three", [1])
    drive(h, Three)
    inst = instance_of(ThreeChanged, {"workflow_id": "wf-3", "run_id": h.events[0]["run_id"]})
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
    out = h.send(
        "wf-4", "RespondWorkflowTaskCompleted", {"scheduled_seq": 99, "commands": []}, run_id=first.replies[0]["run_id"]
    )
    assert out.stale == 1 and len(h.events) == n


def test_discarding_a_cached_instance_silences_only_its_own_pending_tasks(caplog):
    import gc

    h = Harness()
    h.start("wf-d1", "Three", [1])
    task = h.take_tasks("workflow")[0]
    inst = instance_of(Three, task)
    assert inst.apply(task["events"], task["scheduled_seq"])  # the first activity is scheduled
    pending = inst.loop.tasks()
    assert pending and not any(t.done() for t in pending)  # the run waits on its activity
    other = instance_of(Three, task)
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
