"""What a transition reads and writes: the batch view of a shard and the outbox of a batch.

Shared by the workflow transitions (``state_machine``) and the activity transitions
(``activities``). Nothing here talks to Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from kadence.schemas.records import (
    Command,
    ConcurrencyLimit,
    ConcurrencyState,
    EmitHistoryEvent,
    Failure,
    PendingActivity,
    Priority,
    RecentRequest,
    WorkflowState,
)
from kadence.topics import serde
from kadence.topics.priority import inherit
from kadence.topics.queue_limits import QueueLimit
from kadence.topics.records import new_id
from kadence.topics.standalone import is_activity_key

from .shard_store import ShardStore
from .task_retry import WorkflowTaskRetry

__all__ = [
    "MAX_RESULT_WAITERS",
    "RECENT_REQUESTS",
    "BatchView",
    "Outbox",
    "Transition",
    "activity_waiting_for",
    "closed_message",
    "count_history_bytes",
    "deduplicated",
    "description",
    "dispatch_workflow_task",
    "emit",
    "open_run_or_reply",
    "recent",
    "remember",
    "reply",
    "schedule_workflow_task",
    "send_command",
    "slots_pending",
    "start_timer",
    "waiting_for",
    "workflow_task_needed",
]

log = logging.getLogger(__name__)

#: request IDs remembered per workflow, so that a retried request gets its first answer
RECENT_REQUESTS = 64
#: pending AwaitWorkflowResult requests kept per run
MAX_RESULT_WAITERS = 1000


@dataclass
class Outbox:
    """Everything one batch emits, in order."""

    #: (workflow_id, event) history events, produced to {ns}.history at the shard's partition
    events: list[Any] = field(default_factory=list)
    #: ("workflow" | "activity" | "eager", task_queue, record dict); an "eager" activity task goes
    #: in the reply to the worker that asked for it, not to the task topic (``activities``)
    tasks: list[Any] = field(default_factory=list)
    replies: list[Any] = field(default_factory=list)
    #: TimerRecord dicts, produced to the delay tier that fits their fire time
    timers: list[Any] = field(default_factory=list)
    #: Command records for other workflows (child starts, parent notifications, cancels),
    #: produced to {ns}.commands keyed by their workflow ID inside the same transaction
    commands: list[Any] = field(default_factory=list)
    #: StreamRecord dicts, produced to {ns}.streams keyed by their workflow ID (``processors.streams``)
    streams: list[Any] = field(default_factory=list)
    #: counters for metrics: duplicates suppressed, stale completions rejected
    duplicates: int = 0
    stale: int = 0
    #: eager workflow tasks (decision 0031) recorded, and refused (the workflow moved on)
    eager_accepted: int = 0
    eager_refused: int = 0
    #: closing workflow tasks refused: signals or updates came after them (``state_machine``)
    closes_refused: int = 0
    #: activity attempts sent in a reply to the worker that asked to run them (decision 0054)
    eager_activities: int = 0
    #: for metrics, counted once the batch commits: (workflow type, standalone) of each run
    #: started, and (workflow type, outcome, ms from the run's start to its close, standalone) of
    #: each run closed; ``standalone``: a standalone activity's run (its type is the activity's)
    runs_started: list[Any] = field(default_factory=list)
    runs_closed: list[Any] = field(default_factory=list)
    #: concurrency limits (``processors.concurrency``), by limit name: (name, ms waited) of each
    #: slot acquired, the name of each slot granted and of each request refused by an owner
    slot_waits: list[tuple[str, int]] = field(default_factory=list)
    slots_granted: list[str] = field(default_factory=list)
    slots_refused: list[str] = field(default_factory=list)
    #: rate limits (decision 0058): (name, ms from the request to its admission time) of each
    #: admission, recorded by the holder's processor (0: admitted at once)
    throttled: list[tuple[str, int]] = field(default_factory=list)
    #: commands for shards of this instance applied in the batch, not produced (``routing``)
    inline: int = 0

    def mark(self) -> tuple[int, ...]:
        return (
            len(self.events),
            len(self.tasks),
            len(self.replies),
            len(self.timers),
            len(self.commands),
            len(self.runs_started),
            len(self.runs_closed),
            len(self.streams),
        )

    def stamp(self, mark: tuple[int, ...], ref: tuple[str, str]) -> None:
        """Give the events, tasks and commands appended since ``mark`` the trace context ``ref``
        (the processing span of the command that caused them: ``topics.tracing``)."""
        trace_id, span_id = ref
        for _wf, ev in self.events[mark[0] :]:
            ev["trace_id"], ev["span_id"] = trace_id, span_id
        for _kind, _queue, task in self.tasks[mark[1] :]:
            task["trace_id"], task["span_id"] = trace_id, span_id
        for i in range(mark[4], len(self.commands)):
            self.commands[i] = (*self.commands[i][:5], ref)

    def truncate(self, mark: tuple[int, ...]) -> None:
        del self.events[mark[0] :]
        del self.tasks[mark[1] :]
        del self.replies[mark[2] :]
        del self.timers[mark[3] :]
        del self.commands[mark[4] :]
        del self.runs_started[mark[5] :]
        del self.runs_closed[mark[6] :]
        del self.streams[mark[7] :]


def _copy_state(st: WorkflowState) -> WorkflowState:
    out = st.copy()
    out["pending_activities"] = [a.copy() for a in st["pending_activities"]]
    out["pending_timers"] = [t.copy() for t in st["pending_timers"]]
    out["recent_requests"] = list(st["recent_requests"])
    out["result_waiters"] = list(st["result_waiters"])
    out["search_attributes"] = dict(st["search_attributes"])
    out["pending_children"] = [c.copy() for c in st["pending_children"]]
    out["updates"] = [u.copy() for u in st.get("updates", ())]
    out["held_timers"] = [t.copy() for t in st["held_timers"]]
    return out


def _copy_limit(cs: ConcurrencyState) -> ConcurrencyState:
    out = cs.copy()
    out["holders"] = [h.copy() for h in cs["holders"]]
    out["waiters"] = [w.copy() for w in cs["waiters"]]
    out["recent_ms"] = list(cs.get("recent_ms") or ())
    return out


#: what ``BatchView.rollback`` needs: whether the batch had staged the workflow's state, a copy
#: of it, how many new events it had, and the same of the concurrency limit of that key
Checkpoint = tuple[bool, WorkflowState | None, int, bool, ConcurrencyState | None]


class BatchView:
    """Copy-on-write view of a shard's store for one batch.

    ``state()`` returns a private copy that the transition may mutate; ``put()`` stages it.
    Nothing reaches the store until ``commit_into()`` runs after the Kafka commit.
    """

    def __init__(
        self,
        store: ShardStore,
        build_defaults: dict[str, Any] | None = None,
        task_retry: WorkflowTaskRetry | None = None,
        limits: dict[str, ConcurrencyState] | None = None,
        queue_limits: Mapping[str, QueueLimit] | None = None,
    ) -> None:
        self._store = store
        #: task queue -> its rate limits and concurrency rules (``processors.builds.QueueRules``)
        self.queue_limits: Mapping[str, QueueLimit] = queue_limits if queue_limits is not None else {}
        #: the shard's concurrency limits by key (``processors.concurrency``), and this batch's
        #: changed ones: applied to the shard's table only after the Kafka commit
        self._limit_table = limits if limits is not None else {}
        self.limits: dict[str, ConcurrencyState] = {}
        #: the processor's backoff for failed workflow tasks (``KADENCE_WORKFLOW_TASK_RETRY_*``)
        self.task_retry = task_retry or WorkflowTaskRetry()
        self.states: dict[str, WorkflowState] = {}
        self.new_events: dict[str, list[Any]] = {}
        #: wire bytes produced to Kafka, by workflow ID / event ID: a store that keeps encoded
        #: records (the disk store) takes them instead of encoding every record a second time
        self.raw_states: dict[str, bytes] = {}
        self.raw_events: dict[str, bytes] = {}
        #: task queue -> the build new workflows start on (kept by processors.builds.BuildDefaults)
        self.build_defaults = build_defaults if build_defaults is not None else {}
        #: workflows whose state this batch deletes (archival purge): a tombstone on {ns}.state,
        #: unless a later command of the batch staged a new state for the workflow
        self.purged: set[str] = set()

    def state(self, workflow_id: str) -> WorkflowState | None:
        if workflow_id in self.states:
            return self.states[workflow_id]
        if workflow_id in self.purged:
            return None
        st = self._store.get_state(workflow_id)
        if st is None:
            return None
        st = _copy_state(st)
        self.states[workflow_id] = st
        return st

    def put(self, state: WorkflowState) -> None:
        self.states[state["workflow_id"]] = state

    def limit(self, key: str) -> ConcurrencyState | None:
        """A private copy of the shard's concurrency limit ``key`` (None: never used)."""
        if key in self.limits:
            return self.limits[key]
        cs = self._limit_table.get(key)
        if cs is None:
            return None
        cs = _copy_limit(cs)
        self.limits[key] = cs
        return cs

    def put_limit(self, key: str, cs: ConcurrencyState) -> None:
        self.limits[key] = cs

    def purge(self, workflow_id: str) -> None:
        """Delete the workflow's state (and open-run history) when the batch commits."""
        self.states.pop(workflow_id, None)
        self.purged.add(workflow_id)

    def tombstones(self) -> list[str]:
        """Workflows whose state record this batch replaces with a tombstone."""
        return [wf for wf in self.purged if wf not in self.states]

    def checkpoint(self, workflow_id: str) -> Checkpoint:
        """What ``rollback`` needs to undo a failed transition of this workflow."""
        st = self.states.get(workflow_id)
        cs = self.limits.get(workflow_id)
        return (
            workflow_id in self.states,
            _copy_state(st) if st else None,
            len(self.new_events.get(workflow_id, ())),
            workflow_id in self.limits,
            _copy_limit(cs) if cs else None,
        )

    def rollback(self, workflow_id: str, checkpoint: Checkpoint) -> None:
        had, st, n_events, had_limit, cs = checkpoint
        if had_limit:
            assert cs is not None
            self.limits[workflow_id] = cs
        else:
            self.limits.pop(workflow_id, None)
        if had:
            assert st is not None  # a staged state is a dict, never None
            self.states[workflow_id] = st
        else:
            self.states.pop(workflow_id, None)
        if workflow_id in self.new_events:
            del self.new_events[workflow_id][n_events:]

    def append(self, workflow_id: str, event: dict[str, Any]) -> None:
        self.new_events.setdefault(workflow_id, []).append(event)

    def request_seen(self, workflow_id: str, run_id: str, request_id: str) -> bool:
        """Did an event of this run come from a request with this ID (committed or staged)?"""
        if any(e["request_id"] == request_id and e["run_id"] == run_id for e in self.new_events.get(workflow_id, ())):
            return True
        return self._store.request_seen(workflow_id, run_id, request_id)

    def seq_reached(self, workflow_id: str, run_id: str | None) -> int | None:
        """The last event seq of ``run_id`` after this batch (a reply's consistency token)."""
        st = self.states.get(workflow_id) or self._store.get_state(workflow_id)
        if st is None or run_id is None or st["run_id"] != run_id:
            return None
        return st["next_seq"] - 1

    def history(self, workflow_id: str, run_id: str, since: int = 0) -> list[dict[str, Any]]:
        """The run's events with seq > ``since``, committed and staged."""
        staged = [e for e in self.new_events.get(workflow_id, ()) if e["run_id"] == run_id and e["seq"] > since]
        return self._store.get_history(workflow_id, run_id, since) + staged

    def task_events(self, workflow_id: str, run_id: str, since: int, upto: int | None = None) -> list[Any]:
        """The run's events with ``since`` < seq <= ``upto`` for a workflow task: committed and
        staged; a store that keeps encoded records hands them over without decoding them."""
        staged = [
            e
            for e in self.new_events.get(workflow_id, ())
            if e["run_id"] == run_id and e["seq"] > since and (upto is None or e["seq"] <= upto)
        ]
        return self._store.get_history_encoded(workflow_id, run_id, since, upto) + staged

    def commit_into(self, store: ShardStore) -> None:
        self._limit_table.update(self.limits)
        raw_events = self.raw_events
        for wf in self.tombstones():
            store.delete_state(wf)
        for wf, st in self.states.items():
            store.put_state(wf, st, self.raw_states.get(wf))
            if st["status"] != "running":
                store.drop_history(wf)
                continue
            events = [e for e in self.new_events.get(wf, ()) if e["run_id"] == st["run_id"]]
            if not events:
                continue
            raws = [raw_events.get(e["event_id"]) for e in events] if raw_events else None
            encoded = None if raws is None or None in raws else cast("list[bytes]", raws)
            store.append_history(wf, st["run_id"], events, encoded)


@dataclass(slots=True)
class Transition:
    """One command's transition of a shard: the command, the batch's view of the shard, the
    outbox of what the batch writes, and the batch's time (epoch ms). Made by ``transition``
    (``state_machine.py``) and handed to every step of it, which reads the state through
    ``view``, stages what it writes in ``out``, and dates what it records ``ts``."""

    cmd: Command
    view: BatchView
    out: Outbox
    ts: int

    def for_command(self, cmd: Command) -> Transition:
        """The same batch's transition of another command (a signal-with-start's start)."""
        return Transition(cmd, self.view, self.out, self.ts)


def _emit(
    t: Transition,
    st: WorkflowState,
    etype: str,
    attributes: Mapping[str, Any],
    *,
    request_id: str | None = None,
    ts: int | None = None,
) -> dict[str, Any]:
    """Append a history event to the workflow's current run, at ``ts`` (default: the
    transition's time; an eager workflow task's events carry the time its code ran at, a reset's
    copies the time of the events they copy). Called as ``emit``, whose type checks the
    attributes against the event type's record (issue 49)."""
    seq = st["next_seq"]
    st["next_seq"] = seq + 1
    ev = {
        "event_id": new_id(),
        "aggregate_key": st["workflow_id"],
        "run_id": st["run_id"],
        "seq": seq,
        "timestamp_ms": t.ts if ts is None else ts,
        "trace_id": None,
        "span_id": None,
        "request_id": request_id,
        "attributes": (etype, attributes),
    }
    t.view.append(st["workflow_id"], ev)
    t.out.events.append((st["workflow_id"], ev))
    if etype == "WorkflowExecutionStarted":
        t.out.runs_started.append((st["workflow_type"], is_activity_key(st["workflow_id"])))
    return ev


#: ``_emit``, typed by event: ``emit(t, st, "TimerStarted", {"timer_id": ...})`` is checked
#: against the ``TimerStarted`` record (a misspelt or missing attribute is mypy's finding)
emit: EmitHistoryEvent[Transition, WorkflowState, dict[str, Any]] = _emit


def reply(
    out: Outbox,
    request_id: str | None,
    workflow_id: str,
    status: str,
    *,
    run_id: str | None = None,
    message: str = "",
    result: bytes | None = None,
    failure: Failure | None = None,
    memo: dict[str, Any] | None = None,
    description: dict[str, Any] | None = None,
    reset_plan: dict[str, Any] | None = None,
    activity_tasks: list[Any] | None = None,
) -> None:
    if not request_id:
        return
    out.replies.append(
        {
            "request_id": request_id,
            "workflow_id": workflow_id,
            "run_id": run_id,
            "status": status,
            "message": message,
            "history_offset": None,
            "result": result,
            "failure": failure,
            "history_seq": None,
            "memo": memo or {},
            "description": description,
            "reset_plan": reset_plan,
            "activity_tasks": activity_tasks or [],
        }
    )


def closed_message(st: WorkflowState, run_id: str | None) -> str:
    """Why a command for a run cannot act: the named run is not the current one, or the current one is closed."""
    if run_id and run_id != st["run_id"]:
        return f"run {run_id} is not the current run of workflow {st['workflow_id']!r} (it is closed)"
    return f"workflow is {st['status']}"


#: heartbeat details larger than this are left out of a description (a reply must stay small)
DESCRIBED_DETAILS_MAX = 4096


def description(st: WorkflowState, out: Outbox) -> dict[str, Any]:
    """A ``WorkflowDescription`` of the run's state (describe; no payload but small heartbeat
    details: the reply stays far below Kafka's message size).

    ``out``: the batch's outbox. Its events of this run are already in ``history_length`` but
    not yet in the state's byte count (``count_history_bytes`` adds them when they are encoded
    for the topic, after the batch): their size is added here."""
    written = st.get("history_bytes")
    acts = []
    for a in st["pending_activities"]:
        details = a["heartbeat_details"]
        acts.append(
            {
                "activity_id": a["activity_id"],
                "activity_type": a["activity_type"],
                "task_queue": a["task_queue"],
                "attempt": a["attempt"],
                "scheduled_seq": a["scheduled_seq"],
                "first_scheduled_ms": a["first_scheduled_ms"],
                "attempt_started_ms": a["attempt_started_ms"],
                "last_heartbeat_ms": a["last_heartbeat_ms"],
                "heartbeat_details": details if details is not None and len(details) <= DESCRIBED_DETAILS_MAX else None,
                "last_failure": a["last_failure"],
                "retrying": a["retrying"],
                "next_attempt_ms": a.get("next_attempt_ms") if a["retrying"] else None,
                "cancel_requested": a["cancel_requested"],
                "held": a["held"],
                "waiting_for_slot": activity_waiting_for(a),
                "throttled": a.get("throttled", False),
                "priority": activity_priority(st, a),
            }
        )
    return {
        "workflow_type": st["workflow_type"],
        "task_queue": st["task_queue"],
        "build_id": st["build_id"],
        "start_time_ms": st["start_time_ms"],
        "close_time_ms": st["close_time_ms"],
        "parent_workflow_id": st["parent_workflow_id"],
        "parent_run_id": st["parent_run_id"],
        "children": [
            {"workflow_id": c["workflow_id"], "run_id": c["run_id"], "initiated_seq": c["initiated_seq"]}
            for c in st["pending_children"]
        ],
        "pending_activities": acts,
        "pending_timers": [
            {"timer_id": t["timer_id"], "fire_at_ms": t["fire_at_ms"], "kind": t["kind"]} for t in st["pending_timers"]
        ],
        "signals_received": st["signals_seen"],
        "open_updates": sum(1 for u in st.get("updates", ()) if u["status"] == "accepted"),
        "search_attributes": dict(st["search_attributes"]),
        "cron_schedule": st.get("cron_schedule"),
        "first_task_at_ms": st.get("first_task_at_ms"),
        "history_length": st["next_seq"] - 1,
        "history_size_bytes": None if written is None else written + _unwritten_bytes(st, out),
        "continued_run_id": st["continued_run_id"],
        "paused": st["paused"],
        "held_timers": len(st["held_timers"]),
        "waiting_for_slot": waiting_for(st),
        "throttled_until_ms": st.get("throttled_until_ms"),
        "priority": st.get("priority"),
        "slots_held": list(st.get("concurrency") or [])[: st.get("slots_held", 0)] if st.get("slot_ticket") else [],
        "streams_used": bool(st.get("streams_used")),
    }


def activity_priority(st: WorkflowState, a: PendingActivity) -> Priority | None:
    """The priority an activity's attempts are dispatched with: its own, the run's where it
    leaves a field unset (``topics.priority``)."""
    opts = a["options"]
    return inherit(opts.get("priority") if opts else None, st.get("priority"))


def _unwritten_bytes(st: WorkflowState, out: Outbox) -> int:
    """The encoded size of the run's events in ``out`` (each already given its trace context:
    ``Outbox.stamp`` runs after every command)."""
    wf, run_id = st["workflow_id"], st["run_id"]
    codec = serde.codec("HistoryEvent")
    return sum(len(codec.encode(ev)) for w, ev in out.events if w == wf and ev["run_id"] == run_id)


def count_history_bytes(st: WorkflowState | None, event: dict[str, Any], size: int) -> None:
    """Add an event's encoded size to its run's count (describe's ``history_size_bytes``), when
    the state is of that run and counts (a run started before schema version 11 does not). Called
    where the event is encoded for the history topic, before its state is encoded."""
    if st is not None and st["run_id"] == event["run_id"]:
        written = st.get("history_bytes")
        if written is not None:
            st["history_bytes"] = written + size


def remember(st: WorkflowState, request_id: str | None, status: str, message: str = "") -> None:
    if not request_id:
        return
    entries = st["recent_requests"]
    entries.append({"request_id": request_id, "run_id": st["run_id"], "status": status, "message": message})
    if len(entries) > RECENT_REQUESTS:
        del entries[: len(entries) - RECENT_REQUESTS]


def recent(st: WorkflowState | None, request_id: str | None) -> RecentRequest | None:
    if st is None or not request_id:
        return None
    for r in reversed(st["recent_requests"]):
        if r["request_id"] == request_id:
            return r
    return None


def deduplicated(st: WorkflowState | None, cmd: Command, out: Outbox, view: BatchView | None = None) -> bool:
    """A retried request: answer it as the first time and change nothing.

    Looks in the workflow's recent requests (across runs) and, for the open run, in the request
    IDs of its history events (every signal and cancel of the run, however many)."""
    rid = cmd["request_id"]
    seen: Mapping[str, Any] | None = recent(st, rid)
    if (
        seen is None
        and rid
        and st is not None
        and view is not None
        and view.request_seen(st["workflow_id"], st["run_id"], rid)
    ):
        seen = {"status": "ok", "run_id": st["run_id"], "message": ""}
    if seen is None:
        return False
    out.duplicates += 1
    reply(out, cmd["request_id"], cmd["aggregate_key"], seen["status"], run_id=seen["run_id"], message=seen["message"])
    return True


def open_run_or_reply(t: Transition) -> WorkflowState | None:
    """The open run a request is for, or None after replying (duplicate, not found, closed)."""
    wf = t.cmd["aggregate_key"]
    st = t.view.state(wf)
    if deduplicated(st, t.cmd, t.out, t.view):
        return None
    if st is None:
        reply(t.out, t.cmd["request_id"], wf, "not_found", message=f"workflow {wf!r} not found")
        return None
    if t.cmd["run_id"] and t.cmd["run_id"] != st["run_id"]:  # an earlier run: closed (only the last can run)
        reply(
            t.out,
            t.cmd["request_id"],
            wf,
            "rejected",
            run_id=st["run_id"],
            message=f"run {t.cmd['run_id']} is not the current run of workflow {wf!r} (it is closed)",
        )
        return None
    if st["status"] != "running":
        reply(t.out, t.cmd["request_id"], wf, "rejected", run_id=st["run_id"], message=f"workflow is {st['status']}")
        return None
    return st


def slots_pending(st: WorkflowState) -> bool:
    """Does the run wait for a slot of a concurrency limit (``processors.concurrency``)?"""
    return bool(st.get("slot_ticket")) and st.get("slots_held", 0) < len(st.get("concurrency") or ())


def waiting_for(st: WorkflowState) -> ConcurrencyLimit | None:
    """The concurrency limit whose slot the run waits for (None: it holds them all, or names none)."""
    return st["concurrency"][st["slots_held"]] if slots_pending(st) else None


def activity_waiting_for(a: PendingActivity) -> ConcurrencyLimit | None:
    """The concurrency limit whose slot the activity waits for (None: it holds them all, or names none)."""
    opts = a["options"]
    limits = (opts.get("concurrency") or []) if opts is not None else []
    held = a.get("slots_held", 0)
    return limits[held] if held < len(limits) else None


def schedule_workflow_task(t: Transition, st: WorkflowState, *, full: bool = False, attempt: int = 1) -> None:
    if st["paused"] or st.get("first_task_at_ms") is not None or slots_pending(st):
        # remembered, and scheduled when the run is unpaused (processors.pause), when a cron
        # run's time comes (its "cron_start" timer), or when it holds its concurrency slots
        st["wt_needed"] = True
        return
    st["wt_attempt"] = attempt
    ev = emit(t, st, "WorkflowTaskScheduled", {"task_queue": st["task_queue"], "attempt": attempt})
    st["wt_scheduled_seq"] = ev["seq"]
    st["wt_needed"] = False
    dispatch_workflow_task(t, st, full=full)


def workflow_task_needed(t: Transition, st: WorkflowState, *, full: bool = False) -> None:
    """New events for the workflow's code: a workflow task now, or after the running one.

    ``full``: a task sent now carries the whole history (the worker's cached instance is known
    to be unusable, e.g. it ran an eager workflow task that was refused)."""
    if st["status"] != "running" or is_activity_key(st["workflow_id"]):  # (a standalone activity has no code)
        return
    if st["wt_scheduled_seq"] is None:
        schedule_workflow_task(t, st, full=full)
    else:
        st["wt_needed"] = True


def dispatch_workflow_task(
    t: Transition, st: WorkflowState, *, full: bool, query: dict[str, Any] | None = None
) -> None:
    since = 0 if full else st["wt_last_completed_seq"]
    # a workflow task is the history up to its WorkflowTaskScheduled event; events recorded
    # after it (a redispatch for RequestWorkflowHistory) belong to the next task
    upto = st["wt_scheduled_seq"] if query is None and st["wt_scheduled_seq"] else None
    events = t.view.task_events(st["workflow_id"], st["run_id"], since, upto)
    t.out.tasks.append(
        (
            "workflow",
            st["task_queue"],
            {
                "workflow_id": st["workflow_id"],
                "run_id": st["run_id"],
                "workflow_type": st["workflow_type"],
                "task_queue": st["task_queue"],
                "scheduled_seq": st["wt_scheduled_seq"] or 0,
                "attempt": st["wt_attempt"],
                "full_history": since == 0,
                "events": events,
                "trace_id": None,
                "span_id": None,
                "query": query,
                "build_id": st["build_id"],
            },
        )
    )


def start_timer(
    out: Outbox,
    st: WorkflowState,
    timer_id: str,
    fire_at_ms: int,
    kind: str,
    *,
    scheduled_seq: int = 0,
    attempt: int = 0,
) -> None:
    out.timers.append(
        {
            "workflow_id": st["workflow_id"],
            "run_id": st["run_id"],
            "timer_id": timer_id,
            "fire_at_ms": fire_at_ms,
            "kind": kind,
            "scheduled_seq": scheduled_seq,
            "attempt": attempt,
        }
    )


def send_command(
    out: Outbox,
    workflow_id: str,
    body_type: str,
    body: dict[str, Any],
    *,
    run_id: str | None = None,
    request_id: str | None = None,
) -> None:
    """A command for another workflow (its shard may be another partition), in this transaction."""
    out.commands.append((workflow_id, body_type, body, run_id, request_id, None))
