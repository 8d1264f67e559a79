"""The workflow page's timeline, read from the run's history (the API's JSON events): one row per
activity (scheduled, its attempts, its result), timer, child, update, workflow task, signal and
other event, and the bars of the timeline chart drawn from those rows on one time axis."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

__all__ = ["attribute_text", "chart", "duration", "iso", "ms_of", "run_input", "timeline"]

#: the events that close a run: what is still open then ended with it
_RUN_CLOSE = frozenset(
    {
        "WorkflowExecutionCompleted",
        "WorkflowExecutionFailed",
        "WorkflowExecutionCanceled",
        "WorkflowExecutionTerminated",
        "WorkflowExecutionTimedOut",
        "WorkflowExecutionContinuedAsNew",
    }
)
#: most bars the chart draws (the latest)
CHART_BARS = 60


def iso(ms: int | None) -> str:
    if not ms:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def ms_of(iso: str | None) -> int | None:
    """Epoch ms of an ISO-8601 time; one without a zone is UTC (as the pages show times)."""
    if not iso:
        return None
    when = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def attribute_text(value: Any) -> str:
    """A search attribute's JSON form as the console shows it: a keyword list joined by commas,
    a datetime as its ISO 8601 text, a bool as ``true``/``false``."""
    if isinstance(value, dict) and "datetime" in value:
        return str(value["datetime"])
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def duration(ms: int | None) -> str:
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 120_000:
        return f"{ms / 1000:.1f} s"
    if ms < 7_200_000:
        return f"{ms / 60_000:.1f} min"
    return f"{ms / 3_600_000:.1f} h"


_ACTIVITY_END = {
    "ActivityTaskCompleted": "completed",
    "ActivityTaskFailed": "failed",
    "ActivityTaskTimedOut": "timed out",
    "ActivityTaskCanceled": "canceled",
}
_CHILD_END = {
    "ChildWorkflowExecutionCompleted": "completed",
    "ChildWorkflowExecutionFailed": "failed",
    "StartChildWorkflowExecutionFailed": "start failed",
}


def timeline(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """History events (the API's JSON) grouped as an operator reads them: one row per activity
    (scheduled -> attempts -> result), timer (started -> fired or canceled), child, update, and
    one per other event; each with its start, end, duration, status and its events, in the order
    the groups began."""
    rows: list[dict[str, Any]] = []
    open_groups: dict[tuple[Any, ...], dict[str, Any]] = {}

    def group(key: tuple[Any, ...] | None, kind: str, title: str, e: dict[str, Any]) -> dict[str, Any]:
        row = {
            "kind": kind,
            "title": title,
            "start_ms": ms_of(e["time"]),
            "end_ms": None,
            "status": "open",
            "events": [],
            "first_seq": e["seq"],
        }
        rows.append(row)
        if key is not None:
            open_groups[key] = row
        return row

    for e in events:
        kind, a = e["type"], e["attributes"]
        row = None
        if kind == "ActivityTaskScheduled":
            row = group(("a", a.get("activity_id")), "activity", f"activity {a.get('activity_type')}", e)
            row["status"], row["attempts"], row["failures"] = "scheduled", 1, []
        elif kind in ("ActivityTaskAttemptFailed", "ActivityTaskCancelRequested") or kind in _ACTIVITY_END:
            row = open_groups.get(("a", a.get("activity_id")))
            if row is not None:
                _activity_progress(row, e)
        elif kind == "TimerStarted":
            row = group(("t", a.get("timer_id")), "timer", f"timer {a.get('timer_id')}", e)
            row["status"] = f"fires {iso(a.get('fire_at_ms'))}"
        elif kind in ("TimerFired", "TimerCanceled"):
            row = open_groups.get(("t", a.get("timer_id")))
            if row is not None:
                row["status"], row["end_ms"] = ("fired" if kind == "TimerFired" else "canceled"), ms_of(e["time"])
        elif kind == "StartChildWorkflowExecutionInitiated":
            row = group(("c", e["seq"]), "child", f"child {a.get('workflow_type')} {a.get('workflow_id')}", e)
        elif kind in ("ChildWorkflowExecutionStarted",) or kind in _CHILD_END:
            row = open_groups.get(("c", a.get("initiated_seq")))
            if row is not None and kind in _CHILD_END:
                row["status"], row["end_ms"] = _CHILD_END[kind], ms_of(e["time"])
            elif row is not None:
                row["status"] = "running"
        elif kind == "WorkflowUpdateAccepted":
            row = group(("u", a.get("update_id")), "update", f"update {a.get('update_name')}", e)
        elif kind == "WorkflowUpdateCompleted":
            row = open_groups.get(("u", a.get("update_id")))
            if row is not None:
                row["status"], row["end_ms"] = ("failed" if a.get("failure") else "completed"), ms_of(e["time"])
        elif kind in ("WorkflowTaskScheduled", "WorkflowTaskCompleted"):
            row = rows[-1] if rows and rows[-1]["kind"] == "task" and rows[-1]["end_ms"] is None else None
            if kind == "WorkflowTaskScheduled" or row is None:
                row = group(None, "task", "workflow task", e)
            if kind == "WorkflowTaskCompleted":
                row["status"], row["end_ms"] = "completed", ms_of(e["time"])
        elif kind == "WorkflowSignaled":
            row = group(None, "signal", f"signal {a.get('signal_name')}", e)
            row["status"], row["end_ms"] = "received", row["start_ms"]
        else:
            row = group(None, "event", kind, e)
            row["status"], row["end_ms"] = "", row["start_ms"]
        if row is None:  # a result of something that started before this page of the history
            row = group(None, "event", kind, e)
        row["events"].append(e)
    _close(rows, events)
    return rows


def _activity_progress(row: dict[str, Any], e: dict[str, Any]) -> None:
    """An activity's row after a failed attempt, a cancel request or its end."""
    kind, a = e["type"], e["attributes"]
    if "attempt" in a:
        row["attempts"] = max(row.get("attempts", 1), int(a["attempt"]))
    if kind in _ACTIVITY_END:
        row["status"], row["end_ms"] = _ACTIVITY_END[kind], ms_of(e["time"])
    elif kind == "ActivityTaskAttemptFailed":
        row["status"] = f"retrying (attempt {a.get('attempt', '?')} failed)"
        row["attempts"] = int(a.get("attempt", 1)) + 1
        row["failures"].append(ms_of(e["time"]))


def _close(rows: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
    """Rows still open when the run closed end with it; every row gets its duration."""
    if events and events[-1]["type"] in _RUN_CLOSE:
        closed_at = ms_of(events[-1]["time"])
        for row in rows:
            if row["end_ms"] is None and row["kind"] in ("timer", "activity", "child", "update", "task"):
                row["status"], row["end_ms"] = "ended with the run", closed_at
    for row in rows:
        row["duration"] = duration(row["end_ms"] - row["start_ms"]) if row["end_ms"] and row["start_ms"] else ""


def run_input(events: list[dict[str, Any]]) -> Any:
    """The run's input (its start event's), if the events begin with it; else None."""
    if events and events[0]["type"] == "WorkflowExecutionStarted":
        return events[0]["attributes"].get("input")
    return None


def chart(rows: list[dict[str, Any]], now_ms: int) -> list[dict[str, Any]]:
    """Bars of the timeline chart: the latest ``CHART_BARS`` activities, timers, children,
    updates and workflow tasks on one time axis (left and width in percent of the span from the
    first bar's start to the last end, or now for what is still open), with each activity's
    failed attempts marked where they failed."""
    drawn = [r for r in rows if r["kind"] in ("activity", "timer", "child", "update", "task") and r["start_ms"]]
    drawn = drawn[-CHART_BARS:]
    if not drawn:
        return []
    t0 = min(r["start_ms"] for r in drawn)
    t1 = max(max(r["end_ms"] or now_ms for r in drawn), t0 + 1)
    span: float = t1 - t0

    def pct(ms: int) -> float:
        return round(100 * float(ms - t0) / span, 2)

    bars = []
    for r in drawn:
        end = r["end_ms"] or now_ms
        label = r["title"] + (f" · {r['attempts']} attempts" if r.get("attempts", 1) > 1 else "")
        bars.append(
            {
                "label": label,
                "kind": r["kind"],
                "status": r["status"],
                "open": r["end_ms"] is None,
                "failed": r["status"] in ("failed", "timed out") or bool(r.get("failures")),
                "left": pct(r["start_ms"]),
                "width": max(0.4, round(pct(end) - pct(r["start_ms"]), 2)),
                "marks": [pct(f) for f in r.get("failures", ()) if f],
                "duration": r["duration"] or ("open" if r["end_ms"] is None else ""),
            }
        )
    return bars
