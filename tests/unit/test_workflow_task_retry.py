"""A failed workflow task is retried automatically with exponential backoff (pure logic): a fixed
deployment picks a workflow stuck on non-determinism up without an operator."""

from __future__ import annotations

import pytest

from kadence import ConfigError
from kadence.processors.task_retry import WorkflowTaskRetry

from .engine_harness import Harness
from .pinning_support import answer, conv, one_workflow_task

FAILURE = {
    "type": "NonDeterminismError",
    "message": "m",
    "stack_trace": "",
    "non_retryable": True,
    "details": None,
    "cause": None,
}


def _fail(h: Harness, task: dict):
    return h.send(
        task["workflow_id"],
        "RespondWorkflowTaskFailed",
        {"scheduled_seq": task["scheduled_seq"], "cause": "non_determinism", "failure": FAILURE},
        run_id=task["run_id"],
    )


def test_backoff_doubles_from_one_second_caps_at_ten_minutes_and_never_gives_up():
    retry = WorkflowTaskRetry()
    delays = [retry.delay_ms(a) for a in range(1, 1_001)]
    assert delays[:4] == [1_000, 2_000, 4_000, 8_000]
    assert delays[9:11] == [512_000, 600_000] and set(delays[10:]) == {600_000}  # capped, for ever


def test_a_bad_backoff_is_refused():
    with pytest.raises(ConfigError, match="initial delay"):
        WorkflowTaskRetry(0, 10)
    with pytest.raises(ConfigError, match="maximum delay"):
        WorkflowTaskRetry(1_000, 500)


def test_the_processor_s_backoff_is_its_setting():
    h = Harness(task_retry=WorkflowTaskRetry(50, 200))
    h.start("wf", "WaitGo", [])
    for attempt, want in [(1, 50), (2, 100), (3, 200), (4, 200), (5, 200)]:
        task = one_workflow_task(h)
        assert task["attempt"] == attempt
        _fail(h, task)
        (timer,) = h.timers
        assert timer["fire_at_ms"] - h.last_ts == want
        h.fire_timers()


def test_a_failed_task_is_retried_after_its_backoff_with_the_full_history_until_it_completes():
    h = Harness()
    h.start("wf", "WaitGo", [])
    first = one_workflow_task(h)
    _fail(h, first)
    assert not h.tasks and [t["kind"] for t in h.timers] == ["workflow_task_retry"]
    timer = h.timers[0]
    assert timer["fire_at_ms"] - h.events[-1]["timestamp_ms"] >= 1_000 - 50
    st = h.store.get_state("wf")
    assert st["wt_failure"]["type"] == "NonDeterminismError" and st["wt_scheduled_seq"] is None

    h.fire_timers()
    retry = one_workflow_task(h)
    assert retry["attempt"] == 2 and retry["full_history"] and retry["scheduled_seq"] > first["scheduled_seq"]
    _fail(h, retry)
    assert [t["attempt"] for t in h.timers] == [2]
    assert h.timers[0]["fire_at_ms"] - h.events[-1]["timestamp_ms"] >= 2_000 - 50  # the backoff doubled
    h.fire_timers()
    third = one_workflow_task(h)
    assert third["attempt"] == 3

    # the fixed code answers: the failure is cleared and the workflow goes on
    answer(h, third, None)
    st = h.store.get_state("wf")
    assert st["wt_failure"] is None and st["wt_last_completed_seq"] >= third["scheduled_seq"]
    assert [e["attributes"][0] for e in h.events].count("WorkflowTaskCompleted") == 1
    assert not h.timers


def test_a_retry_timer_changes_nothing_once_another_task_was_scheduled():
    h = Harness()
    h.start("wf", "WaitGo", [])
    _fail(h, one_workflow_task(h))
    # a signal arrives before the retry timer: it schedules the next task itself
    h.send("wf", "SignalWorkflow", {"signal_name": "go", "input": conv.to_bytes(["v"]), "start": None}, request_id="s")
    task = one_workflow_task(h)
    events_before = len(h.events)
    h.fire_timers()
    assert not h.tasks and len(h.events) == events_before  # stale: no second task, no event
    answer(h, task, None)
    assert h.store.get_state("wf")["status"] == "completed"
    # a timer that fires after the run closed is stale as well
    h.timers.append(
        {
            "workflow_id": "wf",
            "run_id": task["run_id"],
            "timer_id": "x",
            "fire_at_ms": 0,
            "kind": "workflow_task_retry",
            "scheduled_seq": 1,
            "attempt": 1,
        }
    )
    assert h.fire_timers() == 1 and not h.tasks
