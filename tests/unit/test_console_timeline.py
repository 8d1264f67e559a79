"""The console's timeline groups a run's history (pure logic): one row per activity with its
attempts and result, per timer, per signal and per workflow task, in the order they began, with
durations; a result whose start is not in the events read stays visible as an event."""

from kadence.gateway.console_timeline import attribute_text, chart, ms_of, run_input, timeline


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
    assert ms_of("2026-12-03T09:00") == ms_of("2026-12-03T09:00:00+00:00") == 1796288400000
    assert ms_of("2026-12-03T10:00:00+01:00") == 1796288400000


def test_activity_rows_count_attempts_and_the_chart_marks_the_failures_on_one_axis():
    events = [
        _e(1, "WorkflowExecutionStarted", 0, workflow_type="Order", input=["o-1"]),
        _e(2, "ActivityTaskScheduled", 0, activity_id="1", activity_type="charge"),
        _e(3, "ActivityTaskAttemptFailed", 1000, activity_id="1", attempt=1),
        _e(4, "ActivityTaskAttemptFailed", 2000, activity_id="1", attempt=2),
        _e(5, "ActivityTaskCompleted", 4000, activity_id="1", attempt=3),
        _e(6, "TimerStarted", 4000, timer_id="t1", fire_at_ms=0),
    ]
    rows = timeline(events)
    charge = next(r for r in rows if r["kind"] == "activity")
    assert charge["attempts"] == 3 and charge["status"] == "completed"
    assert run_input(events) == ["o-1"] and run_input(events[1:]) is None
    bars = chart(rows, now_ms=ms_of("2026-12-03T10:00:08+00:00"))
    assert [(b["label"], b["left"], b["width"], b["open"]) for b in bars] == [
        ("activity charge · 3 attempts", 0.0, 50.0, False),
        ("timer t1", 50.0, 50.0, True),  # open: drawn to now
    ]
    assert bars[0]["marks"] == [12.5, 25.0] and bars[0]["failed"]


def test_what_was_open_when_the_run_closed_ended_with_it_and_no_timer_still_fires():
    events = [
        _e(1, "WorkflowExecutionStarted", 0, workflow_type="Order"),
        _e(2, "TimerStarted", 10, timer_id="t1", fire_at_ms=0),
        _e(3, "ActivityTaskScheduled", 10, activity_id="1", activity_type="pack"),
        _e(4, "WorkflowExecutionTerminated", 900, reason="customer left"),
    ]
    rows = {r["title"]: r for r in timeline(events)}
    assert rows["timer t1"]["status"] == "ended with the run" and rows["timer t1"]["duration"] == "890 ms"
    assert rows["activity pack"]["status"] == "ended with the run"


def test_search_attributes_are_shown_as_text():
    assert attribute_text({"datetime": "2027-01-15T09:30:00Z"}) == "2027-01-15T09:30:00Z"
    assert attribute_text(["eu", "us"]) == "eu, us"
    assert attribute_text(True) == "true" and attribute_text(2) == "2" and attribute_text("gold") == "gold"
