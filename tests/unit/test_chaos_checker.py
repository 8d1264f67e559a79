"""The chaos suite's invariant checker on hand-built histories (pure logic).

A real history is produced in memory (state machine + workflow code, no Kafka), then broken on
purpose, one invariant at a time; the checker must name the invariant and the workflow.
"""

from __future__ import annotations

import copy

import pytest

from kadence import Replayer, activity, workflow
from kadence.topics.payload import JsonConverter
from tests.faults.chaos import checker
from tests.faults.chaos.checker import Expectations, Observations

from .engine_harness import Driver

conv = JsonConverter()


@activity.defn
async def step(x: int) -> int:
    return x + 1


@workflow.defn
class Order:
    def __init__(self) -> None:
        self.note = None

    @workflow.signal
    def approve(self, note: str) -> None:
        self.note = note

    @workflow.run
    async def run(self, n: int) -> dict:
        a = await workflow.execute_activity(step, n)
        await workflow.sleep(2)
        await workflow.wait_condition(lambda: self.note is not None)
        b = await workflow.execute_activity(step, a)
        return {"value": b, "note": self.note}


REPLAYER = Replayer(workflows=[Order])
GARBAGE = (b"wf", b"\x00not a command")


def _kind(e):
    return e["attributes"][0]


def _attrs(e):
    return e["attributes"][1]


@pytest.fixture
def good():
    """A clean run of ``Order(5)`` and what the driver, Redis and the DLQ would hold for it."""
    d = Driver(Order, activity_fn=lambda task, args: ("ok", args[0] + 1))
    d.h.start("wf", "Order", [5], request_id="start-wf")
    d.run(fire_timers=False)
    d.h.send(
        "wf",
        "SignalWorkflow",
        {"signal_name": "approve", "input": conv.to_bytes(["yes"]), "start": None, "identity": "t"},
        request_id="sig-1",
    )
    d.run()
    events = copy.deepcopy(d.h.events)
    assert _kind(events[-1]) == "WorkflowExecutionCompleted"
    fire_at = {_attrs(e)["timer_id"]: _attrs(e)["fire_at_ms"] for e in events if _kind(e) == "TimerStarted"}
    for e in events:  # the harness fires timers at once; a real timer service fires them when due
        if _kind(e) == "TimerFired":
            e["timestamp_ms"] = fire_at[_attrs(e)["timer_id"]] + 3
    run = events[0]["run_id"]
    keys = [f"wf/{run}/{_attrs(e)['activity_id']}" for e in events if _kind(e) == "ActivityTaskScheduled"]
    exp = Expectations(
        results={"wf": {"value": 7, "note": "yes"}}, run_ids={"wf": run}, signals={"sig-1": "wf"}, garbage=[GARBAGE]
    )
    obs = Observations(
        histories={("wf", run): events},
        ledger=list(keys),
        attempts=[(k, 1) for k in keys],
        dead_letters=[{"key": GARBAGE[0], "value": GARBAGE[1], "reason": "undecodable command: bad magic"}],
    )
    return exp, obs, run


def _events(obs, run):
    return obs.histories[("wf", run)]


def _append_copy(events, event):
    """A copy of ``event`` appended to the run as its next event; returns the copy."""
    extra = copy.deepcopy(event)
    extra["seq"] = len(events) + 1
    events.append(extra)
    return extra


def _renumber(events):
    for i, e in enumerate(events, 1):
        e["seq"] = i


def test_a_clean_run_has_no_violation(good):
    exp, obs, _ = good
    assert checker.check(exp, obs, REPLAYER) == []


def test_duplicate_event_is_reported_first_with_the_workflow(good):
    exp, obs, run = good
    events = _events(obs, run)
    events.insert(4, copy.deepcopy(events[3]))
    found = checker.check(exp, obs, REPLAYER)
    assert found[0].invariant == "history" and found[0].workflow_ids == ("wf",)
    assert "seq 4" in found[0].message and "recorded again" in found[0].message
    with pytest.raises(AssertionError, match=r"invariant 'history' violated: .*recorded again.*; workflows: wf"):
        checker.assert_clean(found)


def test_gap_in_sequence_numbers(good):
    _exp, obs, run = good
    del _events(obs, run)[5]
    assert any(v.invariant == "history" and "seqs 6..6 are missing" in v.message for v in checker.check_history(obs))


def test_two_results_for_one_activity(good):
    _exp, obs, run = good
    events = _events(obs, run)
    done = next(e for e in events if _kind(e) == "ActivityTaskCompleted")
    _append_copy(events, done)
    assert any("second result" in v.message for v in checker.check_history(obs))


def test_wrong_result_missing_completion_and_second_run(good):
    exp, obs, run = good
    exp.results["wf"] = {"value": 8, "note": "yes"}
    [v] = checker.check_completion(exp, obs)
    assert "expected {'value': 8" in v.message and v.workflow_ids == ("wf",)

    exp.results["wf"] = {"value": 7, "note": "yes"}
    _events(obs, run).pop()
    [v] = checker.check_completion(exp, obs)
    assert "0 completions" in v.message

    obs.histories[("wf", "another-run")] = copy.deepcopy(_events(obs, run))
    [v] = checker.check_completion(exp, obs)
    assert "2 runs" in v.message


def test_accepted_start_without_history_and_unexplained_run(good):
    exp, obs, run = good
    exp.results["lost"] = {"value": 1}
    obs.histories[("stranger", "r")] = copy.deepcopy(_events(obs, run))
    messages = {v.workflow_ids: v.message for v in checker.check_completion(exp, obs)}
    assert "no run in history" in messages[("lost",)]
    assert "no accepted start or parent explains" in messages[("stranger",)]


def test_history_that_does_not_replay(good):
    _exp, obs, run = good
    scheduled = next(e for e in _events(obs, run) if _kind(e) == "ActivityTaskScheduled")
    _attrs(scheduled)["activity_type"] = "refund"
    [v] = checker.check_replay(obs, REPLAYER)
    assert v.invariant == "replay" and "refund" in v.message and v.workflow_ids == ("wf",)


def test_effect_twice_or_never_and_unknown_effects(good):
    _exp, obs, _run = good
    first = obs.ledger[0]
    obs.ledger.append(first)
    [v] = checker.check_activities(obs)
    assert "effect happened 2 times" in v.message

    obs.ledger = obs.ledger[1:-1]
    [v] = checker.check_activities(obs)
    assert "effect happened 0 times" in v.message

    obs.ledger = [*obs.ledger, first, "wf/other-run/1"]
    [v] = checker.check_activities(obs)
    assert "history never scheduled" in v.message


def test_an_activity_without_a_result_is_a_violation_unless_a_terminate_ended_its_run(good):
    _exp, obs, run = good
    events = _events(obs, run)
    cut = next(i for i, e in enumerate(events) if _kind(e) == "ActivityTaskScheduled") + 1
    close = copy.deepcopy(events[-1])  # WorkflowExecutionCompleted
    del events[cut:]
    events.append(close)
    _renumber(events)
    obs.ledger, obs.attempts = obs.ledger[:1], obs.attempts[:1]  # the first activity ran; nothing after
    assert [v.message for v in checker.check_activities(obs)] == [f"activity 1 of closed run {run} has no result"]
    close["attributes"] = ("WorkflowExecutionTerminated", {"reason": "chaos: the load is over", "identity": "t"})
    assert [v for v in checker.check_activities(obs) if "has no result" in v.message] == []


def test_attempts_must_match_history(good):
    _exp, obs, run = good
    key = obs.attempts[0][0]
    obs.attempts = [a for a in obs.attempts if a[0] != key]
    [v] = checker.check_activities(obs)
    assert "which no worker ran" in v.message

    obs.attempts += [(key, 1), (key, 2)]
    [v] = checker.check_activities(obs)
    assert "workers ran attempts [1, 2]" in v.message

    obs.attempts = [a for a in obs.attempts if a != (key, 2)]
    done = next(e for e in _events(obs, run) if _kind(e) == "ActivityTaskCompleted")
    _attrs(done)["attempt"] = 2  # completed by attempt 2, but history never failed attempt 1
    found = checker.check_activities(obs)
    assert any("history failed attempts []" in v.message for v in found)


def test_signal_lost_duplicated_or_unsent(good):
    exp, obs, run = good
    events = _events(obs, run)
    signaled = next(e for e in events if _kind(e) == "WorkflowSignaled")
    _append_copy(events, signaled)
    [v] = checker.check_signals(exp, obs)
    assert "appears 2 times" in v.message and v.workflow_ids == ("wf",)

    events.pop()
    exp.signals["sig-2"] = "wf"
    [v] = checker.check_signals(exp, obs)
    assert "sig-2 appears 0 times" in v.message

    del exp.signals["sig-2"], exp.signals["sig-1"]
    [v] = checker.check_signals(exp, obs)
    assert "no accepted request sent" in v.message


def test_timer_early_twice_or_lost(good):
    _exp, obs, run = good
    events = _events(obs, run)
    fired = next(e for e in events if _kind(e) == "TimerFired")
    fired["timestamp_ms"] -= 500
    [v] = checker.check_timers(obs)
    assert "ms early" in v.message and v.workflow_ids == ("wf",)

    fired["timestamp_ms"] += 500
    again = _append_copy(events, fired)
    [v] = checker.check_timers(obs)
    assert "ended twice" in v.message

    events.remove(again)
    events.remove(fired)
    _renumber(events)
    [v] = checker.check_timers(obs)
    assert "never fired (lost)" in v.message


def test_undecodable_record_missing_from_the_dead_letters(good):
    exp, obs, _ = good
    obs.dead_letters[0]["reason"] = "transition failed: boom"
    [v] = checker.check_dead_letters(exp, obs)
    assert "dead-lettered with reason 'transition failed" in v.message

    obs.dead_letters = []
    [v] = checker.check_dead_letters(exp, obs)
    assert v.invariant == "dead_letter" and "is not in the dead-letter topic" in v.message


def test_violations_come_in_invariant_order(good):
    exp, obs, _run = good
    obs.dead_letters = []
    exp.results["wf"] = {"value": 0}
    found = checker.check(exp, obs, REPLAYER)
    assert [v.invariant for v in found] == ["completion", "dead_letter"]
    assert checker.summarize(found) == "completion: 1, dead_letter: 1"


def test_update_lost_duplicated_rejected_but_recorded_or_unsent(good):
    exp, obs, run = good
    events = _events(obs, run)
    last = events[-1]

    def add(kind, attrs):
        e = copy.deepcopy(last)
        e["seq"], e["attributes"], e["request_id"] = len(events) + 1, (kind, attrs), attrs["update_id"]
        events.append(e)

    add("WorkflowUpdateAccepted", {"update_id": "up-1", "update_name": "bump", "input": b"[1]", "identity": "t"})
    add("WorkflowUpdateCompleted", {"update_id": "up-1", "result": b"2", "failure": None})
    exp.updates["up-1"] = "wf"
    assert checker.check_updates(exp, obs) == []

    add("WorkflowUpdateAccepted", {"update_id": "up-1", "update_name": "bump", "input": b"[1]", "identity": "t"})
    [v] = checker.check_updates(exp, obs)
    assert "accepted in ['wf', 'wf']" in v.message and v.invariant == "update"
    events.pop()

    exp.updates["up-2"] = "wf"  # answered, but not in history
    [v] = checker.check_updates(exp, obs)
    assert "up-2 is accepted in [] and completed in []" in v.message
    del exp.updates["up-2"]

    exp.rejected_updates["up-1"] = "wf"  # rejected, but recorded
    [v] = checker.check_updates(exp, obs)
    assert "rejected update up-1 is in history" in v.message
    del exp.rejected_updates["up-1"], exp.updates["up-1"]

    [v] = checker.check_updates(exp, obs)
    assert "no answered request sent" in v.message


def _paused_run():
    """``Order(5)`` paused while its timer runs (the timer falls due and is held), signaled, unpaused."""
    d = Driver(Order, activity_fn=lambda task, args: ("ok", args[0] + 1))
    d.h.start("wf", "Order", [5], request_id="start-wf")
    d.run(fire_timers=False)
    d.h.send("wf", "PauseWorkflow", {"reason": "", "identity": "t"}, request_id="pause-1")
    d.h.fire_timers()
    d.h.send(
        "wf",
        "SignalWorkflow",
        {"signal_name": "approve", "input": conv.to_bytes(["yes"]), "start": None, "identity": "t"},
        request_id="sig-1",
    )
    d.h.send("wf", "UnpauseWorkflow", {"reason": "", "identity": "t"}, request_id="unpause-1")
    d.run()
    events = copy.deepcopy(d.h.events)
    assert _kind(events[-1]) == "WorkflowExecutionCompleted"
    exp = Expectations(pauses={"pause-1": "wf", "unpause-1": "wf"})
    return exp, Observations(histories={("wf", events[0]["run_id"]): events}), events


def test_pause_recorded_twice_out_of_order_unsent_or_leaking_work():
    exp, obs, events = _paused_run()
    assert checker.check_pauses(exp, obs) == []
    kinds = [_kind(e) for e in events]
    paused_at, unpaused_at = kinds.index("WorkflowExecutionPaused"), kinds.index("WorkflowExecutionUnpaused")
    assert kinds[paused_at + 1 : unpaused_at] == ["WorkflowSignaled"]  # the timer and the task waited
    # a timer fired while paused
    fired = next(e for e in events if _kind(e) == "TimerFired")
    leaked = copy.deepcopy(events)
    leaked.insert(paused_at + 1, {**copy.deepcopy(fired)})
    _renumber(leaked)
    found = checker.check_pauses(exp, Observations(histories={("wf", "r"): leaked}))
    assert [v.invariant for v in found] == ["pause"] and "TimerFired" in found[0].message
    # the pause recorded twice (a second Paused from the same request)
    twice = copy.deepcopy(events)
    twice.insert(unpaused_at + 1, copy.deepcopy(events[paused_at]))
    _renumber(twice)
    messages = [v.message for v in checker.check_pauses(exp, Observations(histories={("wf", "r"): twice}))]
    assert "pause request 'pause-1' recorded 2 times" in messages
    # an unpause nobody sent, out of order
    ghost = copy.deepcopy(events)
    extra = _append_copy(ghost, events[unpaused_at])
    extra["request_id"] = "ghost"
    messages = [v.message for v in checker.check_pauses(exp, Observations(histories={("wf", "r"): ghost}))]
    assert any("did not send" in m for m in messages) and any("while not paused" in m for m in messages)


def _cron_chain(times, *, last="WorkflowExecutionTerminated"):
    """A cron workflow's chain of runs, by hand: run i is due at ``times[i]`` and its code runs
    50 ms later; every run but the last closes into the next one."""
    histories = {}
    for i, due in enumerate(times):
        run = f"r{i}"
        nxt = f"r{i + 1}" if i + 1 < len(times) else None
        close = ("WorkflowExecutionCompleted", {"result": b"1", "new_run_id": nxt}) if nxt else (last, {"reason": "x"})
        histories[("tick", run)] = [
            {
                "seq": 1,
                "run_id": run,
                "timestamp_ms": due - 900,
                "attributes": (
                    "WorkflowExecutionStarted",
                    {"first_task_at_ms": due, "continued_from_run_id": f"r{i - 1}" if i else None},
                ),
            },
            {"seq": 2, "run_id": run, "timestamp_ms": due + 50, "attributes": ("WorkflowTaskScheduled", {})},
            {"seq": 3, "run_id": run, "timestamp_ms": due + 80, "attributes": close},
        ]
    return Expectations(crons={"tick": "r0"}, cron_period_ms=1000), Observations(histories=histories)


def test_a_cron_chain_is_followed_run_by_run():
    exp, obs = _cron_chain([1000, 2000, 3000])
    assert checker.check_crons(exp, obs) == []
    # a time run twice (a fired timer applied again would start a second run for it)
    exp, obs = _cron_chain([1000, 2000, 2000])
    assert [v.message for v in checker.check_crons(exp, obs)] == [
        "the chain's times repeat or go back: [1000, 2000, 2000]"
    ]
    # a run whose code ran before its time
    exp, obs = _cron_chain([1000, 2000])
    obs.histories[("tick", "r1")][1]["timestamp_ms"] = 1999
    assert "ran at 1999, before its time 2000" in checker.check_crons(exp, obs)[0].message
    # a run outside the chain, a time off the schedule, a chain that ended by itself
    exp, obs = _cron_chain([1000, 2500], last="WorkflowExecutionCompleted")
    obs.histories[("tick", "stray")] = obs.histories[("tick", "r0")]
    messages = sorted(v.message for v in checker.check_crons(exp, obs))
    assert messages == [
        "run r1 is not due at a time of the schedule (2500)",
        "runs outside the chain: ['stray']",
        "the chain's last run ends with WorkflowExecutionCompleted",
    ]
    # a chain of one run
    exp, obs = _cron_chain([1000])
    assert [v.message for v in checker.check_crons(exp, obs)] == ["the chain made 1 run(s)"]


def test_a_signal_carried_by_a_continue_as_new_counts_once_and_a_copy_elsewhere_twice(good):
    exp, obs, run = good
    events = _events(obs, run)
    signaled = next(e for e in events if _kind(e) == "WorkflowSignaled")
    nxt = "next-run"
    copy_in_next = {**copy.deepcopy(signaled), "run_id": nxt, "seq": 3}
    obs.histories[("wf", nxt)] = [copy_in_next]
    # not a continued run: the same signal in two runs is a duplicate
    [v] = checker.check_signals(exp, obs)
    assert "appears 2 times" in v.message
    # the first run continued as new into it: the copy is the carried signal (decision 0053)
    closing = {**copy.deepcopy(events[-1]), "seq": len(events) + 1}
    closing["attributes"] = ("WorkflowExecutionContinuedAsNew", {"new_run_id": nxt, "input": b"[]"})
    events.append(closing)
    assert checker.check_signals(exp, obs) == []


def _limited_run(wf, acquired_at, closed_at, *, max_=2, task_first=False, twice=False):
    """A run that names tenant=t, acquires its slot at ``acquired_at`` and closes at ``closed_at``."""
    limit = {"name": "tenant", "value": "t", "max": max_}

    def ev(kind, attrs, ts):
        return {"run_id": f"{wf}-r", "timestamp_ms": ts, "request_id": None, "attributes": (kind, attrs)}

    events = [ev("WorkflowExecutionStarted", {"concurrency": [limit], "continued_from_run_id": None}, 0)]
    acquired = ev("ConcurrencySlotAcquired", {**limit, "waited_ms": 0, "activity_id": None}, acquired_at)
    task = ev("WorkflowTaskScheduled", {"task_queue": "q", "attempt": 1}, acquired_at)
    events += [task, acquired] if task_first else [acquired, task]
    if twice:
        events.append(dict(acquired))
    events.append(ev("WorkflowExecutionCompleted", {"result": b""}, closed_at))
    for i, e in enumerate(events, 1):
        e["seq"] = i
    return {(wf, f"{wf}-r"): events}


def test_concurrency_holders_over_the_max_code_before_the_slot_or_a_slot_twice():
    exp = Expectations(limited_runs=3)
    clean = {**_limited_run("a", 10, 20), **_limited_run("b", 15, 30), **_limited_run("c", 20, 40)}
    assert checker.check_concurrency(exp, Observations(histories=clean)) == []
    over = {**clean, **_limited_run("c", 19, 40)}  # c takes its slot while a and b hold theirs
    assert [v.message for v in checker.check_concurrency(exp, Observations(histories=over))] == [
        "limit tenant=t: 3 holders at once, its max is 2"
    ]
    early = {**_limited_run("a", 10, 20, task_first=True)}
    assert (
        "workflow task (seq 2) before the slots of ['tenant=t']"
        in checker.check_concurrency(exp, Observations(histories=early))[0].message
    )
    twice = {**_limited_run("a", 10, 20, twice=True)}
    assert (
        "slot of tenant=t acquired 2 times" in checker.check_concurrency(exp, Observations(histories=twice))[0].message
    )
    assert [v.message for v in checker.check_concurrency(exp, Observations(histories={}))] == [
        "3 starts named a concurrency limit and no slot was ever acquired"
    ]


def _rated_run(wf, admitted_at, task_at, *, max_=2, per=1000):
    """A run that names the rate limit signup=eu, admitted for ``admitted_at``, whose first
    workflow task comes at ``task_at``."""
    limit = {"name": "signup", "value": "eu", "max": max_, "per_ms": per}

    def ev(kind, attrs, ts):
        return {"run_id": f"{wf}-r", "timestamp_ms": ts, "request_id": None, "attributes": (kind, attrs)}

    admitted = {**limit, "waited_ms": 0, "activity_id": None, "not_before_ms": admitted_at}
    events = [
        ev("WorkflowExecutionStarted", {"concurrency": [limit], "continued_from_run_id": None}, 0),
        ev("ConcurrencySlotAcquired", admitted, 5),
        ev("WorkflowTaskScheduled", {"task_queue": "q", "attempt": 1}, task_at),
        ev("WorkflowExecutionCompleted", {"result": b""}, task_at + 10),
    ]
    for i, e in enumerate(events, 1):
        e["seq"] = i
    return {(wf, f"{wf}-r"): events}


def test_rate_admissions_over_the_max_in_a_window_or_code_before_the_admission():
    exp = Expectations(limited_runs=3)
    # 2 per second: a and b at once, c a second after a; none of them holds anything
    clean = {**_rated_run("a", 100, 100), **_rated_run("b", 150, 160), **_rated_run("c", 1100, 1180)}
    assert checker.check_concurrency(exp, Observations(histories=clean)) == []
    over = {**clean, **_rated_run("c", 1099, 1180)}  # c admitted 1 ms inside a's window
    assert [v.message for v in checker.check_concurrency(exp, Observations(histories=over))] == [
        "limit signup=eu (rate): 3 admitted in a window of 1000 ms, its max is 2"
    ]
    early = {**_rated_run("a", 500, 499)}
    assert [v.message for v in checker.check_concurrency(exp, Observations(histories=early))] == [
        "workflow task (seq 3) before its admission at 500"
    ]


def _stream_run():
    from tests.faults.chaos.workflows import charge_values

    def ev(seq, kind, **attrs):
        return {"seq": seq, "attributes": (kind, attrs)}

    events = [
        ev(1, "WorkflowExecutionStarted", workflow_type="ChaosOrder"),
        ev(2, "StreamRecordPublished", stream="progress"),
        ev(3, "ActivityTaskScheduled", activity_id="1", activity_type="charge", input=conv.to_bytes([5])),
        ev(4, "ActivityTaskCompleted", activity_id="1", attempt=2),
        ev(5, "WorkflowExecutionCompleted"),
    ]
    from kadence.topics.streams import StreamEntry

    def entry(offset, seq, value=None, activity_id=None, attempt=0, end=False):
        data = None if end else conv.to_bytes(value)
        return StreamEntry(offset, "w1", "r1", "" if end else "progress", data, activity_id, attempt, seq, 1, end)

    entries = [entry(0, 2, "started")]
    entries += [entry(1 + i, 4, v, "1", 2) for i, v in enumerate(charge_values(5, 2))]
    entries.append(entry(9, 5, end=True))
    return Observations(histories={("w1", "r1"): events}, streams=entries), entry, charge_values


def test_stream_records_from_a_refused_attempt_twice_without_an_end_or_not_the_attempts_own():
    obs, entry, values = _stream_run()
    assert checker.check_streams(obs, values) == []
    refused = copy.deepcopy(obs)  # a failed attempt's value reached the topic
    refused.streams.insert(1, entry(1, 4, "charge 5 attempt 1 part 0/3", "1", 1))
    assert any("did not accept it" in v.message for v in checker.check_streams(refused, values))
    twice = copy.deepcopy(obs)  # the workflow's value written twice (a replayed task)
    twice.streams.insert(1, entry(1, 2, "started"))
    assert any("published 2 records" in v.message for v in checker.check_streams(twice, values))
    endless = copy.deepcopy(obs)
    endless.streams.pop()
    assert any("without an end record" in v.message for v in checker.check_streams(endless, values))
    short = copy.deepcopy(obs)  # one of the attempt's values lost
    del short.streams[2]
    assert any("charge attempt 2 left" in v.message for v in checker.check_streams(short, values))
    assert all(v.invariant == "stream" and v.workflow_ids == ("w1",) for v in checker.check_streams(short, values))
