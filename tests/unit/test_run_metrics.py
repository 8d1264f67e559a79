"""What the processor's run metrics count: an outbox notes runs started and closed (rolled back
with the rest of a command's effects), and workflow-type labels are capped."""

from kadence.processors.closing import close_run
from kadence.processors.effects import BatchView, Outbox, Transition
from kadence.processors.store import MemoryShardStore
from kadence.topics.metric_labels import OTHER, BoundedLabel


def _state(**kw) -> dict:
    return {
        "workflow_id": "w",
        "run_id": "r",
        "workflow_type": "Order",
        "start_time_ms": 1_000,
        "parent_workflow_id": None,
        "result_waiters": [],
        "pending_children": [],
        "pending_activities": [],
        **kw,
    }


def _at(out: Outbox, ts: int) -> Transition:
    return Transition({}, BatchView(MemoryShardStore(0)), out, ts)


def test_a_closed_run_is_noted_with_its_type_outcome_and_duration():
    out = Outbox()
    close_run(_at(out, 3_500), _state(), "completed")
    assert out.runs_closed == [("Order", "completed", 2_500, False)]


def test_a_truncated_command_takes_its_run_notes_with_it():
    out = Outbox()
    out.runs_started.append(("Order", False))
    mark = out.mark()
    out.runs_started.append(("Order", False))
    close_run(_at(out, 2_000), _state(), "failed")
    out.truncate(mark)
    assert out.runs_started == [("Order", False)] and out.runs_closed == []


def test_workflow_type_labels_are_capped():
    label = BoundedLabel(limit=2)
    assert [label.value(v) for v in ("A", "B", "C", "A", "D", "B")] == ["A", "B", OTHER, "A", OTHER, "B"]
    assert label.value(None) == OTHER  # a third distinct value, even empty
