"""The console's timeline groups a run's history (pure logic): one row per activity with its
attempts and result, per timer, per signal and per workflow task, in the order they began, with
durations; a result whose start is not in the events read stays visible as an event."""

from kadence.gateway.console import _ms_of, timeline


def _e(seq, kind, ms, **attrs):
    return {
        "seq": seq,
        "type": kind,
        "time": f"2026-12-03T10:00:{ms // 1000:02d}.{ms % 1000:03d}+00:00",
        "attributes": attrs,
    }


def test_events_are_grouped_as_an_operator_reads_them():
    events = [
        _e(1, "WorkflowExecutionStarted", 0, workflow_type="Order"),
        _e(2, "WorkflowTaskScheduled", 0),
        _e(3, "WorkflowTaskCompleted", 20),
        _e(4, "ActivityTaskScheduled", 20, activity_id="1", activity_type="charge"),
        _e(5, "TimerStarted", 20, timer_id="t1", fire_at_ms=0),
        _e(6, "ActivityTaskAttemptFailed", 520, activity_id="1", attempt=1),
        _e(7, "WorkflowSignaled", 700, signal_name="approve"),
        _e(8, "ActivityTaskCompleted", 2020, activity_id="1"),
        _e(9, "TimerFired", 3020, timer_id="t1"),
        _e(10, "WorkflowExecutionCompleted", 3100),
    ]
    rows = timeline(events)
    assert [(r["kind"], r["title"], r["status"], r["duration"]) for r in rows] == [
        ("event", "WorkflowExecutionStarted", "", "0 ms"),
        ("task", "workflow task", "completed", "20 ms"),
        ("activity", "activity charge", "completed", "2.0 s"),
        ("timer", "timer t1", "fired", "3.0 s"),
        ("signal", "signal approve", "received", "0 ms"),
        ("event", "WorkflowExecutionCompleted", "", "0 ms"),
    ]
    assert [e["seq"] for e in rows[2]["events"]] == [4, 6, 8]  # the attempt's failure is in the activity's row
    assert sum(len(r["events"]) for r in rows) == len(events)


def test_a_result_without_its_start_stays_visible():
    rows = timeline([_e(40, "ActivityTaskCompleted", 0, activity_id="9"), _e(41, "TimerFired", 5, timer_id="x")])
    assert [(r["kind"], r["title"]) for r in rows] == [("event", "ActivityTaskCompleted"), ("event", "TimerFired")]


def test_a_time_without_a_zone_is_utc():
    assert _ms_of("2026-12-03T09:00") == _ms_of("2026-12-03T09:00:00+00:00") == 1796288400000
    assert _ms_of("2026-12-03T10:00:00+01:00") == 1796288400000
