"""Build-ID pinning in the state machine (pure logic): a run stays on the build it started on,
an operator moves it, and a task answered by a worker of another build changes nothing."""

import asyncio

import pytest

from kadence import workflow
from kadence.topics import Catalogue, ConfigError, KafkaConfig
from kadence.topics.builds import build_topics, validate_build_id

from .engine_harness import Harness
from .pinning_support import WaitGo, answer, conv, one_workflow_task


@workflow.defn
class Chain:
    @workflow.run
    async def run(self, n):
        if n > 0:
            workflow.continue_as_new(n - 1)
        return "end"


@workflow.defn
class Parent:
    @workflow.run
    async def run(self, queue):
        await asyncio.gather(
            workflow.start_child_workflow(WaitGo, id="child-same"),
            workflow.start_child_workflow(WaitGo, id="child-other", task_queue=queue),
        )
        await workflow.wait_condition(lambda: False)


def _completed_builds(h: Harness, wf: str) -> list:
    return [
        e["attributes"][1]["build_id"]
        for e in h.events
        if e["aggregate_key"] == wf and e["attributes"][0] == "WorkflowTaskCompleted"
    ]


def test_a_run_without_a_default_build_is_unversioned_and_stays_so():
    h = Harness()
    h.start("u", "WaitGo", [])
    task = one_workflow_task(h)
    assert task["build_id"] is None and h.store.get_state("u")["build_id"] is None
    answer(h, task, None)
    h.build_defaults["q"] = "B"  # promoted later: the open run is not moved
    h.send("u", "SignalWorkflow", {"signal_name": "go", "input": conv.to_bytes(["x"]), "start": None}, request_id="s")
    task = one_workflow_task(h)
    assert task["build_id"] is None
    h.send(
        "u", "RequestWorkflowHistory", {"scheduled_seq": task["scheduled_seq"], "build_id": None}, run_id=task["run_id"]
    )
    answer(h, one_workflow_task(h), None)
    assert h.store.get_state("u")["status"] == "completed"
    assert _completed_builds(h, "u") == [None, None]


def test_runs_stay_on_the_build_they_started_on_and_new_runs_take_the_new_default():
    h = Harness()
    h.build_defaults["q"] = "A"
    h.start("old", "WaitGo", [], request_id="r-old")
    task = one_workflow_task(h)
    assert task["build_id"] == "A" and h.store.get_state("old")["build_id"] == "A"
    started = next(e for e in h.events if e["aggregate_key"] == "old")
    assert started["attributes"] == ("WorkflowExecutionStarted", started["attributes"][1])
    assert started["attributes"][1]["build_id"] == "A"
    answer(h, task, "A")

    h.build_defaults["q"] = "B"
    h.start("new", "WaitGo", [], request_id="r-new")
    task_new = one_workflow_task(h)
    assert task_new["build_id"] == "B"
    answer(h, task_new, "B")

    for wf in ("old", "new"):
        h.send(
            wf,
            "SignalWorkflow",
            {"signal_name": "go", "input": conv.to_bytes([wf]), "start": None},
            request_id=f"s-{wf}",
        )
    tasks = {t["workflow_id"]: t for t in h.take_tasks("workflow")}
    assert tasks["old"]["build_id"] == "A" and tasks["new"]["build_id"] == "B"
    for wf, build in (("old", "A"), ("new", "B")):
        h.send(
            wf,
            "RequestWorkflowHistory",
            {"scheduled_seq": tasks[wf]["scheduled_seq"], "build_id": build},
            run_id=tasks[wf]["run_id"],
        )
        answer(h, one_workflow_task(h), build)
        assert h.store.get_state(wf)["status"] == "completed"
    assert _completed_builds(h, "old") == ["A", "A"]
    assert _completed_builds(h, "new") == ["B", "B"]


def test_a_task_answered_by_another_build_is_stale_and_changes_nothing():
    h = Harness()
    h.build_defaults["q"] = "A"
    h.start("wf", "WaitGo", [])
    task = one_workflow_task(h)
    n_events = len(h.events)
    for wrong in ("B", None):
        out = answer(h, task, wrong)
        assert out.stale == 1 and not out.events
        out = h.send(
            "wf",
            "RespondWorkflowTaskFailed",
            {
                "scheduled_seq": task["scheduled_seq"],
                "cause": "worker_error",
                "build_id": wrong,
                "failure": {
                    "type": "X",
                    "message": "m",
                    "stack_trace": "",
                    "non_retryable": False,
                    "details": None,
                    "cause": None,
                },
            },
            run_id=task["run_id"],
        )
        assert out.stale == 1
        out = h.send(
            "wf",
            "RequestWorkflowHistory",
            {"scheduled_seq": task["scheduled_seq"], "build_id": wrong},
            run_id=task["run_id"],
        )
        assert out.stale == 1 and not out.tasks
    assert len(h.events) == n_events and h.store.get_state("wf")["wt_scheduled_seq"] == task["scheduled_seq"]
    answer(h, task, "A")
    assert _completed_builds(h, "wf") == ["A"]


def test_move_sends_the_waiting_task_to_the_new_build_and_the_old_build_is_stale():
    h = Harness()
    h.build_defaults["q"] = "A"
    h.start("wf", "WaitGo", [])
    first = one_workflow_task(h)
    answer(h, first, "A")
    h.send("wf", "SignalWorkflow", {"signal_name": "go", "input": conv.to_bytes(["v"]), "start": None}, request_id="s")
    waiting = one_workflow_task(h)  # nobody serves build A now
    assert waiting["build_id"] == "A"

    out = h.send("wf", "UpdateWorkflowBuild", {"build_id": "B", "identity": "ops"}, request_id="mv-1")
    assert [r["status"] for r in out.replies] == ["ok"]
    assert not out.events  # a move changes no history: replay does not depend on it
    moved = one_workflow_task(h)
    assert moved["build_id"] == "B" and moved["full_history"] and moved["scheduled_seq"] == waiting["scheduled_seq"]
    assert h.store.get_state("wf")["build_id"] == "B"

    # a retry of the move is answered once and sends nothing again
    out = h.send("wf", "UpdateWorkflowBuild", {"build_id": "B", "identity": "ops"}, request_id="mv-1")
    assert out.duplicates == 1 and not out.tasks

    assert answer(h, moved, "A").stale == 1  # A's worker came back with the old copy: too late
    answer(h, moved, "B")
    st = h.store.get_state("wf")
    assert st["status"] == "completed" and conv.from_bytes(st["result"]) == "v"
    assert _completed_builds(h, "wf") == ["A", "B"]


def test_move_retries_a_failed_task_on_the_new_build_and_unpin_goes_unversioned():
    h = Harness()
    h.build_defaults["q"] = "A"
    h.start("wf", "WaitGo", [])
    task = one_workflow_task(h)
    h.send(
        "wf",
        "RespondWorkflowTaskFailed",
        {
            "scheduled_seq": task["scheduled_seq"],
            "cause": "non_determinism",
            "build_id": "A",
            "failure": {
                "type": "NonDeterminismError",
                "message": "m",
                "stack_trace": "",
                "non_retryable": True,
                "details": None,
                "cause": None,
            },
        },
        run_id=task["run_id"],
    )
    assert h.store.get_state("wf")["wt_failure"] is not None and not h.tasks

    h.send("wf", "UpdateWorkflowBuild", {"build_id": "B", "identity": "ops"}, request_id="mv")
    retry = one_workflow_task(h)
    assert retry["build_id"] == "B" and retry["scheduled_seq"] > task["scheduled_seq"]

    h.send("wf", "UpdateWorkflowBuild", {"build_id": None, "identity": "ops"}, request_id="unpin")
    again = one_workflow_task(h)
    assert again["build_id"] is None and again["scheduled_seq"] == retry["scheduled_seq"]
    answer(h, again, None)
    assert h.store.get_state("wf")["build_id"] is None and h.store.get_state("wf")["wt_failure"] is None


def test_move_rejects_bad_input_and_changes_nothing():
    h = Harness()
    h.build_defaults["q"] = "A"
    h.start("wf", "WaitGo", [])
    h.take_tasks("workflow")
    out = h.send("wf", "UpdateWorkflowBuild", {"build_id": "1.4.2", "identity": "ops"}, request_id="bad")
    assert [r["status"] for r in out.replies] == ["rejected"] and "invalid" in out.replies[0]["message"]
    assert not out.tasks and h.store.get_state("wf")["build_id"] == "A"
    out = h.send("missing", "UpdateWorkflowBuild", {"build_id": "B", "identity": "ops"}, request_id="nf")
    assert [r["status"] for r in out.replies] == ["not_found"]
    h.send("wf", "TerminateWorkflow", {"reason": "x", "identity": "ops"}, request_id="t")
    out = h.send("wf", "UpdateWorkflowBuild", {"build_id": "B", "identity": "ops"}, request_id="closed")
    assert [r["status"] for r in out.replies] == ["rejected"] and not out.tasks


def test_continue_as_new_stays_on_the_build_even_after_a_new_default():
    h = Harness()
    h.build_defaults["q"] = "A"
    h.start("c", "Chain", [1])
    task = one_workflow_task(h)
    h.build_defaults["q"] = "B"
    answer(h, task, "A", cls=Chain)
    st = h.store.get_state("c")
    assert st["run_id"] != task["run_id"] and st["build_id"] == "A"
    second = one_workflow_task(h)
    assert second["build_id"] == "A" and second["run_id"] == st["run_id"]


def test_a_child_on_its_parents_queue_inherits_the_build_elsewhere_takes_that_queues_default():
    h = Harness()
    h.build_defaults.update(q="A", other="X")
    h.start("p", "Parent", ["other"])
    out = answer(h, one_workflow_task(h), "A", cls=Parent)
    starts = {wf: body for wf, btype, body, _run, _rid, _trace in out.commands if btype == "StartWorkflow"}
    assert starts["child-same"]["build_id"] == "A" and starts["child-other"]["build_id"] is None
    h.build_defaults["q"] = "B"  # promoted meanwhile: the child still joins its parent's build
    for wf, body in starts.items():
        h.send(wf, "StartWorkflow", body, request_id=f"start-{wf}")
    assert h.store.get_state("child-same")["build_id"] == "A"
    assert h.store.get_state("child-other")["build_id"] == "X"


def test_build_ids_are_checked_and_name_their_topics():
    for good in ("A", "v1_4_2", "3f9c2ab", "release-2026-01"):
        assert validate_build_id(good) == good
    for bad in ("", "1.4.2", "-x", "a b", "a/b", "x" * 65, None, 7):
        with pytest.raises(ConfigError, match="build ID"):
            validate_build_id(bad)
    assert validate_build_id(None, allow_none=True) is None
    cat = Catalogue(KafkaConfig(namespace="ns"))
    assert cat.build_tasks("orders.eu", "v2") == "ns.tasks.build.orders.eu.v2"
    have = {
        "ns.tasks.workflow.orders.eu": 4,
        "ns.tasks.build.orders.eu.v2": 4,
        "ns.tasks.activity.orders.eu": 4,
        "ns.builds": 1,
    }
    assert build_topics(cat, have) == [
        ("orders.eu", "v2", "ns.tasks.build.orders.eu.v2"),
        ("orders.eu", None, "ns.tasks.workflow.orders.eu"),
    ]
    assert any(s.name == "ns.builds" and s.config["cleanup.policy"] == "compact" for s in cat.core_specs())
