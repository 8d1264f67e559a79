"""``kadence verify``'s checks, pure logic: each kind of gap planted in an otherwise clean history
is found, with its check and workflow, and a clean one gives none."""

from __future__ import annotations

import pytest

from kadence.connectors.verify import HistoryChecker, ReplyChecker, Report, check_state


def _ev(seq: int, kind: str, ts: int = 1000, wf: str = "wf", run: str = "r1", **attrs) -> dict:
    return {"aggregate_key": wf, "run_id": run, "seq": seq, "timestamp_ms": ts, "attributes": (kind, attrs)}


def _clean(wf: str = "wf", run: str = "r1") -> list[dict]:
    return [
        _ev(1, "WorkflowExecutionStarted", wf=wf, run=run),
        _ev(2, "ActivityTaskScheduled", wf=wf, run=run, activity_id="a1"),
        _ev(3, "ActivityTaskAttemptFailed", wf=wf, run=run, activity_id="a1", scheduled_seq=2, attempt=1),
        _ev(4, "ActivityTaskCompleted", wf=wf, run=run, activity_id="a1", scheduled_seq=2, attempt=2),
        _ev(5, "TimerStarted", wf=wf, run=run, timer_id="t1", fire_at_ms=5000),
        _ev(6, "TimerFired", ts=5001, wf=wf, run=run, timer_id="t1", started_seq=5),
        _ev(7, "WorkflowExecutionCompleted", wf=wf, run=run),
    ]


def _gaps(events: list[dict], tail: bool = False):
    checker = HistoryChecker(tail=tail)
    for e in events:
        checker.add(e)
    return checker


def test_a_clean_history_has_no_gap_and_its_last_seq_is_known():
    checker = _gaps(_clean() + _clean(run="r2"))
    assert checker.gaps == []
    assert checker.last_seqs() == {("wf", "r1"): (7, True), ("wf", "r2"): (7, True)}


@pytest.mark.parametrize(
    "plant, check, words",
    [
        (lambda h: [*h[:3], h[2], *h[3:]], "history", "recorded again"),  # a duplicate event (issue 15's bug)
        (lambda h: h[:2] + h[3:], "history", "missing before seq 4"),  # a gap
        (lambda h: h[1:], "history", "starts at seq 2"),
        (lambda h: [*h, _ev(8, "ActivityTaskScheduled", activity_id="late")], "history", "follows the close"),
        (
            lambda h: (
                h[:4]
                + [_ev(5, "ActivityTaskFailed", activity_id="a1", scheduled_seq=2, attempt=2)]
                + [dict(e, seq=e["seq"] + 1) for e in h[4:]]
            ),
            "activity",
            "second result",
        ),
        (
            lambda h: (
                h[:3]
                + [_ev(4, "ActivityTaskAttemptFailed", activity_id="a1", scheduled_seq=2, attempt=1)]
                + [dict(e, seq=e["seq"] + 1) for e in h[3:]]
            ),
            "activity",
            "failed twice",
        ),
        (lambda h: [*h[:5], _ev(6, "TimerFired", ts=4000, timer_id="t1", started_seq=5), *h[6:]], "timer", "early"),
        (
            lambda h: [*h[:6], _ev(7, "TimerFired", ts=5002, timer_id="t1", started_seq=5), dict(h[6], seq=8)],
            "timer",
            "ended twice",
        ),
        (  # a cancel that did cancel (started_seq names the start) after the fire: ended twice
            lambda h: [*h[:6], _ev(7, "TimerCanceled", ts=5002, timer_id="t1", started_seq=5), dict(h[6], seq=8)],
            "timer",
            "ended twice",
        ),
    ],
)
def test_each_planted_gap_is_found(plant, check, words):
    gaps = _gaps(plant(_clean())).gaps
    assert gaps, "the planted gap was not found"
    assert gaps[0].check == check and words in gaps[0].message and gaps[0].workflow_id == "wf", gaps


def test_a_cancel_that_lost_the_race_with_the_fire_is_a_no_op_not_a_second_end():
    # the timer fired while the workflow task that canceled it was in flight: the engine records
    # the cancel with started_seq 0 and changes nothing (tests/unit/test_timer_cancel_race.py)
    history = _clean()
    raced = [*history[:6], _ev(7, "TimerCanceled", ts=5002, timer_id="t1", started_seq=0), dict(history[6], seq=8)]
    assert _gaps(raced).gaps == []


def test_a_tail_may_start_anywhere_but_must_go_on_without_gaps():
    assert _gaps(_clean()[3:], tail=True).gaps == []
    gaps = _gaps(_clean()[3:4] + _clean()[5:], tail=True).gaps
    assert [g.check for g in gaps] == ["history"] and "missing" in gaps[0].message


def test_a_state_that_counts_events_the_history_lacks_is_a_gap():
    last = _gaps(_clean()).last_seqs()
    assert check_state({"wf": {"run_id": "r1", "next_seq": 8, "status": "completed"}}, last) == []
    (gap,) = check_state({"wf": {"run_id": "r1", "next_seq": 10, "status": "completed"}}, last)
    assert gap.check == "state" and "ends at seq 7" in gap.message
    (gap,) = check_state({"other": {"run_id": "x", "next_seq": 3, "status": "running"}}, last)
    assert "ends at seq 0" in gap.message
    open_run = _gaps(_clean()[:4]).last_seqs()
    (gap,) = check_state({"wf": {"run_id": "r1", "next_seq": 5, "status": "completed"}}, open_run)
    assert "no closing event" in gap.message


def _reply(status: str, run: str | None = "r1", rid: str = "req", result=None) -> dict:
    return {"workflow_id": "wf", "request_id": rid, "run_id": run, "status": status, "result": result, "failure": None}


def test_an_accepted_request_answered_differently_later_is_a_gap():
    checker = ReplyChecker()
    for r in (
        _reply("ok"),
        _reply("ok"),
        _reply("not_found", None, rid="sig"),
        _reply("ok", rid="sig"),
        _reply("running", rid="res"),
        _reply("completed", rid="res", result={"data": b"1"}),
    ):
        checker.add(r)
    assert checker.gaps == []  # the same answer again; a first refusal; reads
    checker.add(_reply("ok", run="r2"))
    (gap,) = checker.gaps
    assert gap.check == "reply" and "later answered ok (run r2)" in gap.message


def test_the_report_counts_every_gap_and_is_ok_only_without_any():
    report = Report("ns", None)
    assert report.ok
    report.add(_gaps(_clean()[1:]).gaps)
    assert not report.ok and report.counts["history"] == 1
    assert '"ok": false' in report.to_json()


def test_a_run_being_deleted_after_archival_is_not_checked():
    """Compaction may already have dropped the first events of an archived run whose tombstones
    are in the topic: neither its history nor its state is reported."""
    checker = _gaps(_clean()[3:])  # its first three events compacted away
    checker.add_tombstone(b"wf/r1/1")
    assert checker.gaps == [] and checker.last_seqs() == {}
    assert (
        check_state(
            {"wf": {"run_id": "r1", "next_seq": 8, "status": "completed"}}, checker.last_seqs(), checker.deleted
        )
        == []
    )


def test_a_state_counting_other_bytes_than_its_history_holds_is_a_gap():
    checker = HistoryChecker()
    for seq, size in ((1, 100), (2, 50), (3, 70)):
        checker.add(
            {
                "aggregate_key": "wf",
                "run_id": "r1",
                "seq": seq,
                "timestamp_ms": 0,
                "attributes": ("WorkflowTaskScheduled", {}),
            },
            size,
        )
    last, sizes = checker.last_seqs(), checker.sizes()
    assert sizes == {("wf", "r1"): 220}
    state = {"run_id": "r1", "next_seq": 4, "status": "running", "history_bytes": 220}
    assert check_state({"wf": state}, last, sizes=sizes) == []
    (gap,) = check_state({"wf": {**state, "history_bytes": 219}}, last, sizes=sizes)
    assert gap.check == "state" and "counts 219 history bytes but the history holds 220" in gap.message
    # not compared: a state from before schema version 11, and a history that goes past the state
    assert check_state({"wf": {**state, "history_bytes": None}}, last, sizes=sizes) == []
    assert check_state({"wf": {**state, "next_seq": 3, "history_bytes": 150}}, last, sizes=sizes) == []
    # a history whose seqs are a gap already (seq 2 again) is not compared: one fault, one gap
    checker.add(
        {
            "aggregate_key": "wf",
            "run_id": "r1",
            "seq": 2,
            "timestamp_ms": 0,
            "attributes": ("WorkflowTaskScheduled", {}),
        },
        50,
    )
    assert len(checker.gaps) == 1 and check_state({"wf": state}, checker.last_seqs(), sizes=checker.sizes()) == []
