"""Priority and fairness (issue 46 item 4, decision 0060): the record's checks and inheritance,
the lane a task goes to, and the worker's dispatch order (``LocalBacklog``) with fake records.
The real broker's tests: tests/integration/test_priority.py."""

from __future__ import annotations

import collections
import random
from datetime import timedelta
from types import SimpleNamespace

import pytest

from kadence import Priority, WorkflowNotFoundError, activity, workflow
from kadence._definitions import priority_record
from kadence._local_backlog import LocalBacklog
from kadence.testing import WorkflowEnvironment
from kadence.topics.catalogue import Catalogue
from kadence.topics.config import KafkaConfig
from kadence.topics.errors import InvalidArgumentError, SchemaError
from kadence.topics.priority import (
    LANE_WEIGHTS,
    check_priority,
    fairness_headers,
    fairness_of,
    inherit,
    level_of,
    priority_problem,
)
from tests.support.codecs import pin_write_version

CAT = Catalogue(KafkaConfig(bootstrap="127.0.0.1:9", namespace="ns"))
LANES = {topic: float(LANE_WEIGHTS[level]) for level, topic in CAT.activity_lanes("q")}
_offsets = collections.Counter()


def rec(level: int = 3, key: str | None = None, weight: float = 0.0, partition: int = 0, tag: object = None):
    topic = CAT.activity_lane("q", level)
    offset = _offsets[(topic, partition)]
    _offsets[(topic, partition)] += 1
    headers = fairness_headers({"priority_key": level, "fairness_key": key, "fairness_weight": weight})
    return SimpleNamespace(
        topic=lambda: topic,
        partition=lambda: partition,
        offset=lambda: offset,
        headers=lambda: headers,
        value=lambda: b"task",
        level=level,
        key=key,
        tag=tag,
    )


def drain(backlog: LocalBacklog, n: int | None = None) -> list:
    out = []
    while backlog and (n is None or len(out) < n):
        out.append(backlog.pop())
    return out


# -- the record ----------------------------------------------------------------------------------


def test_priority_arguments_are_checked_before_anything_is_sent():
    assert priority_record(None) is None
    assert priority_record(2) == {"priority_key": 2, "fairness_key": None, "fairness_weight": 0.0}
    assert Priority(fairness_key="acme", fairness_weight=2.5).to_record() == {
        "priority_key": 0,
        "fairness_key": "acme",
        "fairness_weight": 2.5,
    }
    assert Priority().to_record() is None  # all inherited: nothing to send
    for bad in (0, 6, -1):
        with pytest.raises(InvalidArgumentError, match="priority_key"):
            priority_record(bad)
    with pytest.raises(InvalidArgumentError, match="kadence.Priority"):
        priority_record("high")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="kadence.Priority"):
        priority_record(True)  # type: ignore[arg-type]
    for weight in (0, -1.0, 1001.0, float("nan"), float("inf")):
        with pytest.raises(InvalidArgumentError):
            Priority(fairness_key="a", fairness_weight=weight)
    with pytest.raises(InvalidArgumentError, match="fairness_key"):
        Priority(fairness_key="")
    with pytest.raises(InvalidArgumentError, match="fairness_key"):
        Priority(fairness_key="a\nforged log line")
    with pytest.raises(InvalidArgumentError, match="fairness_key"):
        Priority(fairness_key="x" * 256)


def test_a_raw_record_is_judged_as_the_processor_judges_it():
    assert priority_problem(None) is None
    assert priority_problem({"priority_key": 1}) is None
    assert "priority_key" in priority_problem({"priority_key": 9})
    assert "must be a Priority" in priority_problem("1")
    assert "fairness_weight" in priority_problem({"fairness_weight": -2.0})


def test_a_pinned_writer_refuses_a_priority_it_would_drop(monkeypatch):
    pin_write_version(monkeypatch, 18)
    try:
        with pytest.raises(SchemaError, match="schema version 19"):
            check_priority({"priority_key": 1})
        assert check_priority(None) is None  # no priority: nothing to drop
    finally:
        pin_write_version(monkeypatch, None)


def test_unset_fields_are_inherited_field_by_field():
    run = {"priority_key": 2, "fairness_key": "acme", "fairness_weight": 3.0}
    assert inherit(None, run) == run
    assert inherit({"priority_key": 5, "fairness_key": None, "fairness_weight": 0.0}, run) == {
        "priority_key": 5,
        "fairness_key": "acme",
        "fairness_weight": 3.0,
    }
    assert inherit({"priority_key": 0, "fairness_key": "globex", "fairness_weight": 0.0}, run) == {
        "priority_key": 2,
        "fairness_key": "globex",
        "fairness_weight": 3.0,
    }
    assert inherit(None, None) is None


def test_workflow_tasks_have_lanes_too_for_a_queue_and_for_each_build():
    assert CAT.workflow_lane("q", 3) == CAT.workflow_tasks("q")
    assert CAT.workflow_lane("q", 3, "v2") == CAT.build_tasks("q", "v2")
    assert CAT.workflow_lane("q", 1) == "ns.tasks.workflow-p1.q"
    assert CAT.workflow_lane("q", 5, "v2") == "ns.tasks.build-p5.q.v2"
    assert {s.name for s in CAT.queue_specs("q")} >= {t for _l, t in CAT.workflow_lanes("q")}
    assert {s.name for s in CAT.build_specs("q", "v2")} == {t for _l, t in CAT.workflow_lanes("q", "v2")}
    # the build listing (kadence builds) sees each build once: the lanes are not builds
    from kadence.topics.builds import build_topics

    have = {s.name: 4 for s in CAT.queue_specs("q") + CAT.build_specs("q", "v2")}
    assert [(q, b) for q, b, _t in build_topics(CAT, have)] == [("q", "v2"), ("q", None)]


def test_each_level_is_its_own_topic_and_a_bad_level_goes_to_the_default_lane():
    assert CAT.activity_lane("q", 3) == CAT.activity_tasks("q") == "ns.tasks.activity.q"
    assert CAT.activity_lane("q", 1) == "ns.tasks.activity-p1.q"
    assert [level for level, _t in CAT.activity_lanes("q")] == [1, 2, 3, 4, 5]
    # no lane's name is a queue's (a queue may hold dots, not this prefix)
    assert not any(t.startswith("ns.tasks.activity.") for level, t in CAT.activity_lanes("q") if level != 3)
    assert {s.name for s in CAT.queue_specs("q")} >= {t for _l, t in CAT.activity_lanes("q")}
    assert level_of(None) == 3 and level_of({"priority_key": 0}) == 3 and level_of({"priority_key": 1}) == 1
    assert level_of({"priority_key": 42}) == 3  # a producer that bypassed the checks


def test_the_fairness_header_round_trips_and_a_foreign_one_is_harmless():
    assert fairness_headers(None) is None
    assert fairness_headers({"priority_key": 1, "fairness_key": None, "fairness_weight": 2.0}) is None
    headers = fairness_headers({"priority_key": 0, "fairness_key": "acme", "fairness_weight": 2.5})
    assert fairness_of(headers) == (b"acme", 2.5)
    assert fairness_of(None) == (b"", 1.0)
    assert fairness_of([("kadence-fairness-key", b"x"), ("kadence-fairness-weight", b"lots")]) == (b"x", 1.0)
    assert fairness_of([("kadence-fairness-weight", b"-3")]) == (b"", 1.0)


# -- the worker's dispatch order ---------------------------------------------------------------


def test_one_lane_one_key_is_arrival_order():
    backlog = LocalBacklog(LANES)
    records = [rec(tag=i) for i in range(50)]
    for r in records:
        backlog.add(r)
    assert [r.tag for r in drain(backlog)] == list(range(50))
    assert len(backlog) == 0 and backlog.pop() is None


def test_a_first_level_task_behind_a_long_last_level_backlog_goes_next():
    backlog = LocalBacklog(LANES)
    for i in range(1000):
        backlog.add(rec(level=5, tag=i))
    drain(backlog, 10)
    backlog.add(rec(level=1, tag="urgent"))
    assert backlog.pop().tag == "urgent"


def test_levels_share_dispatches_by_weight_and_none_is_starved():
    backlog = LocalBacklog(LANES)
    for level in (1, 2, 3, 4, 5):
        for _ in range(400):
            backlog.add(rec(level=level))
    first = collections.Counter(r.level for r in drain(backlog, 310))
    # 310 dispatches = 10 turns of 16+8+4+2+1
    assert first == {1: 160, 2: 80, 3: 40, 4: 20, 5: 10}
    assert len(drain(backlog)) == 2000 - 310  # everything left goes too


def test_an_idle_lane_saves_no_credit():
    backlog = LocalBacklog(LANES)
    for _ in range(300):
        backlog.add(rec(level=3))
    drain(backlog, 200)  # level 3 alone for a long time; level 5 idle
    for _ in range(50):
        backlog.add(rec(level=5))
    got = collections.Counter(r.level for r in drain(backlog, 50))
    # level 5 starts at the current pass: 1 for level 3's 4, not a burst of what it "missed"
    assert got[5] == 10 and got[3] == 40


def test_fairness_keys_share_a_lane_by_weight_whatever_the_burst():
    backlog = LocalBacklog(LANES)
    for i in range(1000):  # the big tenant's burst came first
        backlog.add(rec(key="big", tag=i))
    for i in range(20):
        backlog.add(rec(key="small", tag=i))
    first = drain(backlog, 40)
    assert sum(r.key == "small" for r in first) == 20  # every other dispatch until it has none
    assert [r.tag for r in first if r.key == "small"] == list(range(20))  # its own in order
    backlog = LocalBacklog(LANES)
    for _ in range(300):
        backlog.add(rec(key="gold", weight=3.0))
        backlog.add(rec(key="basic"))
    got = collections.Counter(r.key for r in drain(backlog, 200))
    assert got == {"gold": 150, "basic": 50}


def test_taking_a_record_the_rate_limit_picked_keeps_the_order_of_the_rest():
    backlog = LocalBacklog(LANES)
    records = [rec(level=random.Random(i).choice([1, 3, 5]), key=f"k{i % 3}", tag=i) for i in range(60)]
    for r in records:
        backlog.add(r)
    ordered = backlog.ordered()
    assert sorted(r.tag for r in ordered) == list(range(60))
    assert ordered[0].level == 1
    chosen = ordered[7]
    backlog.take(chosen)
    rest = drain(backlog)
    assert len(rest) == 59 and chosen not in rest
    for key in ("k0", "k1", "k2"):  # each key's records still in arrival order, per lane
        for level in (1, 3, 5):
            tags = [r.tag for r in rest if r.key == key and r.level == level]
            assert tags == sorted(tags)


def test_revoked_partitions_leave_the_backlog():
    backlog = LocalBacklog(LANES)
    for i in range(40):
        backlog.add(rec(level=1 + i % 5, key=f"k{i % 4}", partition=i % 2, tag=i))
    lane1 = CAT.activity_lane("q", 1)
    backlog.drop({(t, 1) for t in LANES})
    rest = drain(backlog)
    assert len(rest) == 20 and all(r.partition() == 0 for r in rest)
    assert backlog.lane_count(lane1) == 0 and len(backlog) == 0


# -- inheritance through the engine's own transitions (the test kit) ---------------------------

SEEN: list[tuple[str, object]] = []


@activity.defn
async def note(tag: str) -> None:
    SEEN.append((tag, activity.info().priority))


@workflow.defn
class Child:
    @workflow.run
    async def run(self) -> None:
        await workflow.execute_activity(note, "child", start_to_close_timeout=timedelta(seconds=5))


@workflow.defn
class Tree:
    @workflow.run
    async def run(self, again: bool) -> None:
        await workflow.execute_activity(note, "own", start_to_close_timeout=timedelta(seconds=5), priority=1)
        await workflow.execute_activity(note, "inherited", start_to_close_timeout=timedelta(seconds=5))
        await workflow.execute_child_workflow(Child, id=f"{workflow.info().workflow_id}-c", priority=Priority(2))
        if again:
            workflow.continue_as_new(False)


async def test_activities_children_and_the_next_run_inherit_what_they_do_not_set():
    SEEN.clear()
    async with WorkflowEnvironment(workflows=[Tree, Child], activities=[note]) as env:
        handle = await env.client.start_workflow(
            Tree, True, id="tree", task_queue="q", priority=Priority(4, fairness_key="acme", fairness_weight=2.0)
        )
        await handle.result(timeout=10)
        described = await handle.describe()
    acme = {"fairness_key": "acme", "fairness_weight": 2.0}
    want = [
        ("own", Priority(1, **acme)),  # its own level, the run's key
        ("inherited", Priority(4, **acme)),
        ("child", Priority(2, **acme)),  # the child's level, the parent's key, and its activity inherits both
    ]
    assert SEEN == want * 2  # the continued run kept the chain's priority
    assert described.priority == {"priority_key": 4, "fairness_key": "acme", "fairness_weight": 2.0}


async def test_a_bad_priority_changes_nothing():
    async with WorkflowEnvironment(workflows=[Tree, Child], activities=[note]) as env:
        with pytest.raises(InvalidArgumentError):
            await env.client.start_workflow(Tree, False, id="bad", task_queue="q", priority=7)
        with pytest.raises(WorkflowNotFoundError):
            await env.client.get_workflow_handle("bad").describe()


def test_the_read_ahead_counts_bytes_and_a_scan_can_stop_early():
    backlog = LocalBacklog(LANES)
    lane = CAT.activity_lane("q", 3)
    for i in range(5):
        backlog.add(rec(key=f"k{i % 2}", partition=i % 2))
    assert backlog.lane_bytes(lane) == 5 * len(b"task")
    backlog.pop()
    assert backlog.lane_bytes(lane) == 4 * len(b"task")
    assert len(backlog.ordered(most=3)) == 3 and len(backlog.ordered()) == 4
    backlog.take(backlog.ordered()[1])
    backlog.drop({(lane, 0), (lane, 1)})
    assert backlog.lane_bytes(lane) == 0 and len(backlog) == 0
