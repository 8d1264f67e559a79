"""Standalone activities in the state machine (decision 0063): a run keyed by an activity ID
schedules its activity in the start's transaction, never gets a workflow task, and closes with
the activity's outcome."""

from __future__ import annotations

import pytest

from kadence.topics.errors import InvalidArgumentError, InvalidIdentifierError
from kadence.topics.payload import JsonConverter
from kadence.topics.standalone import activity_key, activity_start_body, reuse_policy_of

from .engine_harness import Harness

conv = JsonConverter()
KEY = activity_key("charge-42")


def options(**kw):
    base = {
        "task_queue": "payments",
        "schedule_to_close_timeout_ms": None,
        "schedule_to_start_timeout_ms": None,
        "start_to_close_timeout_ms": 10_000,
        "heartbeat_timeout_ms": None,
        "retry_policy": None,
        "concurrency": [],
        "priority": None,
    }
    return {**base, **kw}


def start(h, *, request_id="s1", reuse="allow_duplicate", **kw):
    body = activity_start_body("charge", conv.to_bytes([42]), options(**kw), id_reuse_policy=reuse)
    h.send(KEY, "StartWorkflow", body, request_id=request_id)
    return h.replies[-1]


def respond(h, task, *, result=None, failure=None):
    common = {"activity_id": task["activity_id"], "scheduled_seq": task["scheduled_seq"], "attempt": task["attempt"]}
    if failure is None:
        body = {**common, "result": conv.to_bytes(result)}
        h.send(task["workflow_id"], "RespondActivityTaskCompleted", body, run_id=task["run_id"])
    else:
        h.send(task["workflow_id"], "RespondActivityTaskFailed", {**common, "failure": failure}, run_id=task["run_id"])


def kinds(h):
    return [e["attributes"][0] for e in h.events]


def outcome(h):
    h.send(KEY, "AwaitWorkflowResult", {"wait": False}, request_id=f"d{len(h.replies)}")
    return h.replies[-1]


def test_the_start_schedules_the_activity_and_no_workflow_task():
    h = Harness()
    answer = start(h)
    assert answer["status"] == "ok" and answer["run_id"]
    assert kinds(h) == ["WorkflowExecutionStarted", "ActivityTaskScheduled"]
    assert h.take_tasks("workflow") == []
    (task,) = h.take_tasks("activity")
    assert task["workflow_id"] == KEY and task["activity_id"] == "charge-42" and task["activity_type"] == "charge"
    assert conv.from_bytes(task["input"]) == [42]


def test_a_retried_activity_closes_the_run_with_its_one_result():
    h = Harness()
    start(h)
    failure = {"type": "ValueError", "message": "card declined"}
    for attempt in (1, 2):
        (task,) = h.take_tasks("activity")
        assert task["attempt"] == attempt
        respond(h, task, failure=failure)
        h.fire_timers()  # the retry's backoff
    (task,) = h.take_tasks("activity")
    respond(h, task, result={"charged": 42})
    respond(h, task, result={"charged": 99})  # a duplicate completion: stale, nothing recorded
    assert kinds(h)[-2:] == ["ActivityTaskCompleted", "WorkflowExecutionCompleted"]
    assert kinds(h).count("ActivityTaskCompleted") == 1 and "WorkflowTaskScheduled" not in kinds(h)
    reply = outcome(h)
    assert reply["status"] == "completed" and conv.from_bytes(reply["result"]) == {"charged": 42}


def test_a_non_retryable_failure_fails_the_run_with_the_activitys_failure():
    h = Harness()
    start(h)
    (task,) = h.take_tasks("activity")
    respond(h, task, failure={"type": "CardError", "message": "stolen", "non_retryable": True})
    reply = outcome(h)
    assert reply["status"] == "failed"
    assert reply["failure"]["type"] == "CardError" and reply["failure"]["message"] == "stolen"


def test_a_schedule_to_close_timeout_times_the_run_out():
    h = Harness()
    start(h, start_to_close_timeout_ms=None, schedule_to_close_timeout_ms=1)
    h.take_tasks("activity")
    h.fire_timers()
    assert kinds(h)[-2:] == ["ActivityTaskTimedOut", "WorkflowExecutionTimedOut"]
    assert outcome(h)["status"] == "timed_out"


def test_a_cancel_cancels_the_activity_at_once_and_its_attempt_learns_it_at_its_heartbeat():
    h = Harness()
    start(h)
    (task,) = h.take_tasks("activity")
    h.send(KEY, "RequestCancelWorkflow", {"reason": "customer left"}, request_id="c1")
    assert h.replies[-1]["status"] == "ok"
    assert kinds(h)[-3:] == ["ActivityTaskCancelRequested", "ActivityTaskCanceled", "WorkflowExecutionCanceled"]
    beat = {"activity_id": task["activity_id"], "scheduled_seq": task["scheduled_seq"], "attempt": 1, "details": None}
    h.send(KEY, "RecordActivityHeartbeat", beat, request_id="hb1", run_id=task["run_id"])
    assert h.replies[-1]["status"] == "cancel_requested"
    respond(h, task, result="late")  # the attempt's late result changes nothing
    assert outcome(h)["status"] == "canceled"


def test_terminate_closes_the_run_and_the_attempts_result_is_stale():
    h = Harness()
    start(h)
    (task,) = h.take_tasks("activity")
    h.send(KEY, "TerminateWorkflow", {"reason": "ops", "identity": "me"}, request_id="t1")
    respond(h, task, result="late")
    assert outcome(h)["status"] == "terminated" and kinds(h)[-1] == "WorkflowExecutionTerminated"


def test_the_reuse_and_conflict_policies():
    h = Harness()
    start(h, request_id="a")
    again = start(h, request_id="b")
    assert again["status"] == "already_started"
    (task,) = h.take_tasks("activity")
    respond(h, task, result=1)
    assert start(h, request_id="c", reuse="reject_duplicate")["status"] == "already_started"
    assert start(h, request_id="d", reuse="allow_duplicate_failed_only")["status"] == "already_started"
    first_run = task["run_id"]
    fresh = start(h, request_id="e")
    assert fresh["status"] == "ok" and fresh["run_id"] != first_run
    # terminate_existing: the open run is terminated and a new one starts
    replaced = start(h, request_id="f", reuse=reuse_policy_of("allow_duplicate", "terminate_existing"))
    assert replaced["status"] == "ok" and replaced["run_id"] != fresh["run_id"]
    assert "WorkflowExecutionTerminated" in kinds(h)


@pytest.mark.parametrize("body_type", ["SignalWorkflow", "QueryWorkflow", "PauseWorkflow"])
def test_what_a_run_without_code_cannot_take_is_refused(body_type):
    h = Harness()
    start(h)
    bodies = {
        "SignalWorkflow": {"signal_name": "go", "input": b"[]", "identity": ""},
        "QueryWorkflow": {"query_name": "q", "input": b"[]"},
        "PauseWorkflow": {"reason": "", "identity": ""},
    }
    before = len(h.events)
    h.send(KEY, body_type, bodies[body_type], request_id="x")
    assert h.replies[-1]["status"] == "rejected" and body_type in h.replies[-1]["message"]
    assert len(h.events) == before


def test_the_prefix_is_reserved_and_options_belong_to_it():
    h = Harness()
    h.start(KEY, "Order", [], request_id="w1")  # a workflow start may not use an activity's key
    assert h.replies[-1]["status"] == "rejected" and "standalone activities" in h.replies[-1]["message"]
    body = activity_start_body("charge", b"[]", options())
    h.send("order-1", "StartWorkflow", body, request_id="w2")  # nor an activity a workflow's
    assert h.replies[-1]["status"] == "rejected" and "only for a standalone activity" in h.replies[-1]["message"]
    assert h.events == []


def test_bad_input_is_a_typed_error():
    with pytest.raises(InvalidArgumentError, match="start_to_close or a schedule_to_close"):
        activity_start_body("charge", b"[]", options(start_to_close_timeout_ms=None))
    with pytest.raises(InvalidIdentifierError):
        activity_key("")
    with pytest.raises(InvalidArgumentError, match="id_conflict_policy"):
        reuse_policy_of("allow_duplicate", "replace")
    with pytest.raises(InvalidArgumentError, match="allow_duplicate only"):
        reuse_policy_of("reject_duplicate", "terminate_existing")


def test_a_process_pinned_to_an_older_schema_cannot_start_one(monkeypatch):
    from kadence.topics.errors import ConfigError
    from tests.support.codecs import pin_write_version

    pin_write_version(monkeypatch, 20)
    try:
        with pytest.raises(ConfigError, match="standalone activities need version 21"):
            activity_start_body("charge", b"[]", options())
    finally:
        pin_write_version(monkeypatch, None)


def test_the_kind_attribute_marks_standalone_activities_and_is_reserved_for_them():
    from kadence.topics.protocol import start_body
    from kadence.topics.standalone import ACTIVITY_KIND, KIND_ATTRIBUTE

    body = activity_start_body("charge", b"[]", options(), search_attributes={"tenant": "acme"})
    assert body["search_attributes"] == {"tenant": "acme", KIND_ATTRIBUTE: ACTIVITY_KIND}
    with pytest.raises(InvalidArgumentError, match="reserved"):
        activity_start_body("charge", b"[]", options(), search_attributes={KIND_ATTRIBUTE: "x"})
    with pytest.raises(InvalidArgumentError, match="reserved"):
        start_body("Order", "orders", b"[]", search_attributes={KIND_ATTRIBUTE: ACTIVITY_KIND})
    h = Harness()  # a producer that bypassed the SDK: refused by the engine, nothing recorded
    raw = {
        "workflow_type": "Order",
        "task_queue": "q",
        "input": b"[]",
        "search_attributes": {KIND_ATTRIBUTE: "activity"},
    }
    h.send("order-1", "StartWorkflow", raw, request_id="k1")
    assert h.replies[-1]["status"] == "rejected" and KIND_ATTRIBUTE in h.replies[-1]["message"]
    assert h.events == []
