"""The typed result of ``WorkflowHandle.describe()`` (Temporal's ``WorkflowExecutionDescription``):
a dataclass with a status enum and datetimes, built from the JSON shape that ``kadence describe``
and ``GET /v1/workflows/{id}`` print (``topics.describe``). Indexing it as the dict it used to be
still works for one release, with a ``DeprecationWarning``."""

from __future__ import annotations

import enum
import warnings
from collections.abc import ItemsView, Iterator, KeysView, ValuesView
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kadence.topics.search_attributes import SearchAttributeValue, from_json, from_wire

__all__ = ["PendingActivityDescription", "WorkflowExecutionDescription", "WorkflowExecutionStatus"]


class WorkflowExecutionStatus(enum.StrEnum):
    """A run's status; compares equal to its string (``status == "running"``)."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"
    TERMINATED = "terminated"
    CONTINUED_AS_NEW = "continued_as_new"
    TIMED_OUT = "timed_out"


def _time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


@dataclass(frozen=True)
class PendingActivityDescription:
    activity_id: str
    activity_type: str
    task_queue: str
    attempt: int
    #: "scheduled_or_running", "retry_wait", "slot_wait" (for a concurrency slot: see
    #: ``waiting_for_slot``), "throttled" (admitted by a rate limit for ``next_attempt_time``)
    #: or "held" (the run is paused)
    state: str
    scheduled_time: datetime | None
    attempt_started_time: datetime | None
    #: ``{"type", "message", "non_retryable"}`` of the last failed attempt
    last_failure: dict[str, Any] | None
    next_attempt_time: datetime | None
    last_heartbeat_time: datetime | None
    heartbeat_details: Any
    cancel_requested: bool
    #: ``{"key": "api=stripe", "max": 5}``: the concurrency limit whose slot it waits for
    waiting_for_slot: dict[str, Any] | None = None
    #: ``{"priority_key", "fairness_key", "fairness_weight"}`` as dispatched (its own, else
    #: its run's; None: neither set one, level 3)
    priority: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, a: dict[str, Any]) -> PendingActivityDescription:
        return cls(
            activity_id=a["activity_id"],
            activity_type=a["activity_type"],
            task_queue=a["task_queue"],
            attempt=a["attempt"],
            state=a["state"],
            scheduled_time=_time(a["scheduled_time"]),
            attempt_started_time=_time(a["attempt_started_time"]),
            last_failure=a["last_failure"],
            next_attempt_time=_time(a["next_attempt_time"]),
            last_heartbeat_time=_time(a["last_heartbeat_time"]),
            heartbeat_details=a["heartbeat_details"],
            cancel_requested=a["cancel_requested"],
            waiting_for_slot=a.get("waiting_for_slot"),
            priority=a.get("priority"),
        )


@dataclass(frozen=True)
class WorkflowExecutionDescription:
    """A run as the engine holds it (docs/guide.md, "Describing a run")."""

    workflow_id: str
    run_id: str
    status: WorkflowExecutionStatus
    workflow_type: str | None
    task_queue: str | None
    build_id: str | None
    start_time: datetime | None
    close_time: datetime | None
    paused: bool
    held_timers: int
    #: ``{"workflow_id", "run_id"}`` of the parent, for a child run
    parent: dict[str, str] | None
    children: list[dict[str, str]]
    pending_activities: list[PendingActivityDescription]
    #: ``{"timer_id", "fire_time", "kind"}`` each
    pending_timers: list[dict[str, Any]]
    signals_received: int
    open_updates: int
    #: name -> a str, a list of str, an int, a float, a bool or a datetime (UTC)
    search_attributes: dict[str, SearchAttributeValue]
    memo: dict[str, Any]
    history_length: int | None
    history_size_bytes: int | None
    #: the next run's ID, after a continue-as-new
    continued_run_id: str | None
    #: ``{"cause", "type", "message"}`` of a running run's failed workflow task (a stuck run)
    last_task_failure: dict[str, str] | None
    #: a completed run's result (decoded)
    result: Any = None
    #: ``{"type", "message", "non_retryable"}`` of a run that did not complete
    failure: dict[str, Any] | None = None
    #: a cron workflow's schedule (``cron_schedule=`` at its start)
    cron_schedule: str | None = None
    #: a run whose code waits (a cron run's time, a debounced start's, a rate limit's
    #: admission): when its code first runs (None once it has)
    execution_time: datetime | None = None
    #: ``{"key": "tenant=acme", "max": 20}``: the concurrency limit whose slot the run waits
    #: for before its code runs (docs/guide.md, "Concurrency limits")
    waiting_for_slot: dict[str, Any] | None = None
    #: the concurrency limits whose slots the run holds (and the rate limits that admitted it)
    concurrency_slots: list[dict[str, Any]] = field(default_factory=list)
    #: a rate limit admitted the run for this time: its code first runs then
    throttled_until: datetime | None = None
    #: ``{"priority_key", "fairness_key", "fairness_weight"}`` of the run (the default of its
    #: activities and children; None: none set, level 3)
    priority: dict[str, Any] | None = None
    #: the workflow published on a stream (``handle.stream``); its final close ends its streams
    streams_used: bool = False
    _json: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> WorkflowExecutionDescription:
        return cls(
            workflow_id=d["workflow_id"],
            run_id=d["run_id"],
            status=WorkflowExecutionStatus(d["status"]),
            workflow_type=d["workflow_type"],
            task_queue=d["task_queue"],
            build_id=d["build_id"],
            start_time=_time(d["start_time"]),
            close_time=_time(d["close_time"]),
            paused=d["paused"],
            held_timers=d["held_timers"],
            parent=d["parent"],
            children=list(d["children"]),
            pending_activities=[PendingActivityDescription.from_json(a) for a in d["pending_activities"]],
            pending_timers=list(d["pending_timers"]),
            signals_received=d["signals_received"],
            open_updates=d["open_updates"],
            search_attributes=from_wire(from_json(d["search_attributes"])),
            memo=dict(d["memo"]),
            history_length=d["history_length"],
            history_size_bytes=d["history_size_bytes"],
            continued_run_id=d["continued_run_id"],
            last_task_failure=d["last_task_failure"],
            result=d.get("result"),
            failure=d.get("failure"),
            cron_schedule=d.get("cron_schedule"),
            execution_time=_time(d.get("execution_time")),
            waiting_for_slot=d.get("waiting_for_slot"),
            concurrency_slots=list(d.get("concurrency_slots") or ()),
            throttled_until=_time(d.get("throttled_until")),
            priority=d.get("priority"),
            streams_used=bool(d.get("streams_used")),
            _json=d,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape (what ``kadence describe`` prints): ISO times, plain strings."""
        return dict(self._json)

    # -- the dict form of earlier releases, deprecated ----------------------------------------

    def _deprecated(self) -> None:
        warnings.warn(
            "describe() returns a WorkflowExecutionDescription: read its attributes (d.status), or "
            "d.to_dict() for the JSON shape; indexing it as a dict goes in the next release",
            DeprecationWarning,
            stacklevel=3,
        )

    def __getitem__(self, key: str) -> Any:
        self._deprecated()
        return self._json[key]

    def get(self, key: str, default: Any = None) -> Any:
        self._deprecated()
        return self._json.get(key, default)

    def __contains__(self, key: object) -> bool:
        self._deprecated()
        return key in self._json

    def __iter__(self) -> Iterator[str]:
        self._deprecated()
        return iter(self._json)

    def __len__(self) -> int:
        self._deprecated()
        return len(self._json)

    def keys(self) -> KeysView[str]:
        self._deprecated()
        return self._json.keys()

    def items(self) -> ItemsView[str, Any]:
        self._deprecated()
        return self._json.items()

    def values(self) -> ValuesView[Any]:
        self._deprecated()
        return self._json.values()
