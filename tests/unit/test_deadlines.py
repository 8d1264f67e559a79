"""The processor's deadline index (decision 0026): pure logic, no Kafka."""

from kadence.processors.deadlines import DeadlineIndex, activity_deadlines


def _state(*activities, status="running", run_id="r1", paused=False):
    return {
        "workflow_id": "wf",
        "run_id": run_id,
        "status": status,
        "pending_activities": list(activities),
        "paused": paused,
    }


def _activity(seq=5, attempt=1, started=1_000, stc=3_000, hb=None, s2c=None, retrying=False, last_hb=0):
    return {
        "scheduled_seq": seq,
        "attempt": attempt,
        "attempt_started_ms": started,
        "first_scheduled_ms": 500,
        "last_heartbeat_ms": last_hb,
        "retrying": retrying,
        "options": {
            "start_to_close_timeout_ms": stc,
            "schedule_to_start_timeout_ms": None,
            "heartbeat_timeout_ms": hb,
            "schedule_to_close_timeout_ms": s2c,
        },
    }


def test_deadlines_follow_from_the_state():
    st = _state(_activity(hb=1_000, s2c=60_000, last_hb=2_500))
    got = {d["kind"]: (d["timer_id"], d["fire_at_ms"], d["attempt"]) for d in activity_deadlines(st)}
    assert got == {
        "activity_timeout": ("a5.1.stc", 4_000, 1),
        "heartbeat_timeout": ("a5.1.hb", 3_500, 1),
        "schedule_to_close": ("a5.s2c", 60_500, 0),
    }
    # between attempts only schedule-to-close is armed; a closed run has none
    assert [d["kind"] for d in activity_deadlines(_state(_activity(s2c=60_000, retrying=True)))] == [
        "schedule_to_close"
    ]
    assert activity_deadlines(_state(_activity(), status="completed")) == []
    assert activity_deadlines(None) == []


def test_a_deadline_is_handed_out_once_when_due_and_earliest_first():
    idx = DeadlineIndex()
    idx.update("wf", _state(_activity(seq=5, stc=3_000), _activity(seq=9, stc=1_000)))
    assert idx.next_due_ms() == 2_000
    assert idx.due(1_999, 10) == []
    [(wf, run, body)] = idx.due(2_000, 10)
    assert (wf, run, body["timer_id"]) == ("wf", "r1", "a9.1.stc")
    assert idx.due(2_000, 10) == [] and idx.next_due_ms() == 4_000  # in flight: not again
    assert [b["timer_id"] for _w, _r, b in idx.due(10_000, 10)] == ["a5.1.stc"]


def test_an_aborted_batch_gives_its_deadlines_back():
    idx = DeadlineIndex()
    st = _state(_activity())
    idx.update("wf", st)
    fired = idx.due(5_000, 10)
    idx.settle(fired, committed=False, state_of=lambda wf: st)
    assert [b["timer_id"] for _w, _r, b in idx.due(5_000, 10)] == ["a5.1.stc"]


def test_a_committed_firing_that_the_state_machine_ignored_is_not_repeated():
    idx = DeadlineIndex()
    st = _state(_activity())
    idx.update("wf", st)
    fired = idx.due(5_000, 10)
    idx.settle(fired, committed=True, state_of=lambda wf: st)  # state unchanged: ignored
    assert idx.due(50_000, 10) == [] and idx.next_due_ms() is None
    # a new attempt arms a new deadline, which fires
    idx.update("wf", _state(_activity(attempt=2, started=6_000)))
    assert [b["timer_id"] for _w, _r, b in idx.due(50_000, 10)] == ["a5.2.stc"]


def test_new_states_replace_deadlines_and_heartbeats_move_them():
    idx = DeadlineIndex()
    idx.update("wf", _state(_activity(stc=None, hb=1_000)))
    assert idx.next_due_ms() == 2_000
    idx.update("wf", _state(_activity(stc=None, hb=1_000, last_hb=1_800)))  # a heartbeat came in
    assert idx.due(2_500, 10) == [] and idx.next_due_ms() == 2_800
    idx.update("wf", _state())  # the activity completed
    assert idx.due(100_000, 10) == [] and len(idx) == 0
    idx.update("wf", _state(_activity()))
    idx.update("wf", None)  # purged
    assert idx.next_due_ms() is None


def test_due_respects_the_limit():
    idx = DeadlineIndex()
    for i in range(5):
        idx.update(f"wf{i}", {**_state(_activity()), "workflow_id": f"wf{i}"})
    assert len(idx.due(5_000, 3)) == 3 and len(idx.due(5_000, 3)) == 2


def test_a_paused_run_arms_no_deadline_and_its_unpause_arms_them_again():
    idx = DeadlineIndex()
    idx.update("wf", _state(_activity(stc=3_000), paused=True))
    assert activity_deadlines(_state(_activity(stc=3_000), paused=True)) == []
    assert idx.due(10**12, 10) == [] and idx.next_due_ms() is None
    idx.update("wf", _state(_activity(stc=3_000)))  # unpaused: the deadline that fell due fires at once
    assert [b["timer_id"] for _wf, _r, b in idx.due(10**12, 10)] == ["a5.1.stc"]
