"""One shape for describing a run, shared by the SDK (``WorkflowHandle.describe``), the CLI
(``kadence describe``) and the gateway (``GET /v1/workflows/{id}``): the processor's
``WorkflowDescription`` of the run's state, made JSON-friendly (ISO times, payloads decoded).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from . import serde
from .errors import SchemaError
from .payload import PayloadConverter
from .priority import priority_view
from .search_attributes import to_json as search_attributes_json

__all__ = ["describe_to_json", "run_description"]


def _iso(ms: int | None) -> str | None:
    if not ms:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def _failure(f: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if f is None else {"type": f["type"], "message": f["message"], "non_retryable": f["non_retryable"]}


def _payload(converter: PayloadConverter, data: bytes | None, what: str) -> Any:
    try:
        return converter.from_bytes(data, what=what)
    except SchemaError as exc:  # shown, not raised: describe is for operators, who may lack the codec
        return {"undecodable": str(exc)}


def _limit(lim: dict[str, Any] | None) -> dict[str, Any] | None:
    """A concurrency limit as describe shows it: its key and max (and a rate limit's window)."""
    if lim is None:
        return None
    out = {"key": f"{lim['name']}={lim['value']}", "max": lim["max"]}
    if lim.get("per_ms") is not None:
        out["per_seconds"] = lim["per_ms"] / 1000
    return out


def _activity_state(a: dict[str, Any]) -> str:
    if a.get("held"):
        return "held"
    if a.get("waiting_for_slot"):
        return "slot_wait"
    if a.get("throttled"):
        return "throttled"
    return "retry_wait" if a["retrying"] else "scheduled_or_running"


def run_description(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What the history of a run that is no longer the workflow's current one (before a
    continue-as-new or a reset) says about it, shaped as the processor's ``WorkflowDescription``:
    its type, queue, build, parent, start and close times, search attributes, and its history's
    length and size (the bytes of its records as the topic holds them: re-encoded, as the
    processor counts them when it writes them). Nothing is pending in a closed run."""
    if not events:
        return {}
    kind, started = events[0]["attributes"]
    last_kind, last = events[-1]["attributes"]
    search: dict[str, Any] = {}
    for ev in events:
        k, a = ev["attributes"]
        if k == "WorkflowExecutionStarted":
            search.update(a.get("search_attributes") or {})
        elif k == "SearchAttributesUpserted":
            search.update(a["search_attributes"])
    closed = last_kind.startswith("WorkflowExecution") and last_kind not in (
        "WorkflowExecutionStarted",
        "WorkflowExecutionPaused",
        "WorkflowExecutionUnpaused",
    )
    out: dict[str, Any] = {
        "history_length": len(events),
        "history_size_bytes": sum(len(serde.encode("HistoryEvent", e)) for e in events),
        "search_attributes": search,
        "close_time_ms": events[-1]["timestamp_ms"] if closed else None,
        "continued_run_id": last.get("new_run_id") if closed else None,
    }
    if kind == "WorkflowExecutionStarted":
        out.update(
            workflow_type=started["workflow_type"],
            task_queue=started["task_queue"],
            build_id=started.get("build_id"),
            start_time_ms=events[0]["timestamp_ms"],
            parent_workflow_id=started.get("parent_workflow_id"),
            parent_run_id=started.get("parent_run_id"),
            cron_schedule=started.get("cron_schedule"),
            priority=started.get("priority"),
        )
    return out


def describe_to_json(workflow_id: str, reply: dict[str, Any], converter: PayloadConverter) -> dict[str, Any]:
    """The describe shape of an ``AwaitWorkflowResult`` reply (``wait`` false)."""
    d = reply.get("description") or {}
    status = reply["status"]
    out: dict[str, Any] = {
        "workflow_id": workflow_id,
        "run_id": reply["run_id"],
        "status": status,
        "paused": d.get("paused", False),
        "held_timers": d.get("held_timers", 0),
        "workflow_type": d.get("workflow_type"),
        "task_queue": d.get("task_queue"),
        "build_id": d.get("build_id"),
        "start_time": _iso(d.get("start_time_ms")),
        "close_time": _iso(d.get("close_time_ms")),
        "parent": (
            {"workflow_id": d["parent_workflow_id"], "run_id": d["parent_run_id"]}
            if d.get("parent_workflow_id")
            else None
        ),
        "children": [{"workflow_id": c["workflow_id"], "run_id": c["run_id"]} for c in d.get("children", ())],
        "pending_activities": [
            {
                "activity_id": a["activity_id"],
                "activity_type": a["activity_type"],
                "task_queue": a["task_queue"],
                "attempt": a["attempt"],
                "state": _activity_state(a),
                "waiting_for_slot": _limit(a.get("waiting_for_slot")),
                "scheduled_time": _iso(a["first_scheduled_ms"]),
                "attempt_started_time": _iso(a["attempt_started_ms"]),
                "last_failure": _failure(a["last_failure"]),
                "next_attempt_time": _iso(a["next_attempt_ms"]),
                "last_heartbeat_time": _iso(a["last_heartbeat_ms"]),
                "heartbeat_details": _payload(converter, a["heartbeat_details"], "heartbeat details"),
                "cancel_requested": a["cancel_requested"],
                "priority": priority_view(a.get("priority")),
            }
            for a in d.get("pending_activities", ())
        ],
        "pending_timers": [
            {"timer_id": t["timer_id"], "fire_time": _iso(t["fire_at_ms"]), "kind": t["kind"]}
            for t in d.get("pending_timers", ())
        ],
        "signals_received": d.get("signals_received", 0),
        "open_updates": d.get("open_updates", 0),
        "search_attributes": search_attributes_json(d.get("search_attributes")),
        "cron_schedule": d.get("cron_schedule"),
        "execution_time": _iso(d.get("first_task_at_ms")),
        "memo": {k: _payload(converter, v, f"memo {k!r}") for k, v in (reply.get("memo") or {}).items()},
        "history_length": d.get("history_length"),
        "history_size_bytes": d.get("history_size_bytes"),
        "continued_run_id": d.get("continued_run_id"),
        "last_task_failure": None,
        "waiting_for_slot": _limit(d.get("waiting_for_slot")),
        "concurrency_slots": [_limit(lim) for lim in d.get("slots_held") or ()],
        "throttled_until": _iso(d.get("throttled_until_ms")),
        "priority": priority_view(d.get("priority")),
        "streams_used": bool(d.get("streams_used")),
    }
    failure = reply["failure"]
    if status == "running" and failure:
        out["last_task_failure"] = {"cause": reply["message"], "type": failure["type"], "message": failure["message"]}
    elif status == "completed":
        out["result"] = _payload(converter, reply["result"], "result")
    elif failure:
        out["failure"] = _failure(failure)
    return out
