"""The workflow state machine: one command in, history events, state, tasks and replies out.

Pure logic, no Kafka: ``transition(cmd, view, out)`` reads and writes workflow state through a
``BatchView`` (an overlay over the shard's committed store) and appends everything it emits to an
``Outbox``. The history processor turns an outbox into one Kafka transaction, and applies the
overlay to its store only after that transaction commits.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

from kadence.topics.records import history_key, idempotency_key, new_id, now_ms

__all__ = ["BatchView", "Outbox", "transition", "RECENT_REQUESTS", "MAX_RESULT_WAITERS"]

log = logging.getLogger(__name__)

#: request IDs remembered per workflow, so that a retried request gets its first answer
RECENT_REQUESTS = 64
#: pending AwaitWorkflowResult requests kept per run
MAX_RESULT_WAITERS = 1000
_RUN_NS = uuid.UUID("6b1d6f0e-0c1e-4a52-9d3c-4b8e7f0b9a11")


@dataclass
class Outbox:
    """Everything one batch emits, in order."""

    #: (workflow_id, event) history events, produced to {ns}.history at the shard's partition
    events: list = field(default_factory=list)
    #: ("workflow" | "activity", task_queue, record dict)
    tasks: list = field(default_factory=list)
    replies: list = field(default_factory=list)
    #: counters for metrics: duplicates suppressed, stale completions rejected
    duplicates: int = 0
    stale: int = 0

    def mark(self) -> tuple[int, int, int]:
        return len(self.events), len(self.tasks), len(self.replies)

    def truncate(self, mark: tuple[int, int, int]) -> None:
        del self.events[mark[0]:]
        del self.tasks[mark[1]:]
        del self.replies[mark[2]:]


class BatchView:
    """Copy-on-write view of a shard's store for one batch.

    ``state()`` returns a private copy that the transition may mutate; ``put()`` stages it.
    Nothing reaches the store until ``commit_into()`` runs after the Kafka commit.
    """

    def __init__(self, store):
        self._store = store
        self.states: dict[str, dict] = {}
        self.new_events: dict[str, list] = {}

    def state(self, workflow_id: str) -> dict | None:
        if workflow_id in self.states:
            return self.states[workflow_id]
        st = self._store.get_state(workflow_id)
        if st is None:
            return None
        st = _copy_state(st)
        self.states[workflow_id] = st
        return st

    def put(self, state: dict) -> None:
        self.states[state["workflow_id"]] = state

    def checkpoint(self, workflow_id: str):
        """What ``rollback`` needs to undo a failed transition of this workflow."""
        st = self.states.get(workflow_id)
        return (workflow_id in self.states, _copy_state(st) if st else None,
                len(self.new_events.get(workflow_id, ())))

    def rollback(self, workflow_id: str, checkpoint) -> None:
        had, st, n_events = checkpoint
        if had:
            self.states[workflow_id] = st
        else:
            self.states.pop(workflow_id, None)
        if workflow_id in self.new_events:
            del self.new_events[workflow_id][n_events:]

    def append(self, workflow_id: str, event: dict) -> None:
        self.new_events.setdefault(workflow_id, []).append(event)

    def history(self, workflow_id: str, run_id: str) -> list[dict]:
        """All events of the run, committed and staged."""
        staged = [e for e in self.new_events.get(workflow_id, ()) if e["run_id"] == run_id]
        return self._store.get_history(workflow_id, run_id) + staged

    def commit_into(self, store) -> None:
        for wf, st in self.states.items():
            store.put_state(wf, st)
            if st["status"] != "running":
                store.drop_history(wf)
                continue
            events = [e for e in self.new_events.get(wf, ()) if e["run_id"] == st["run_id"]]
            if events:
                store.append_history(wf, st["run_id"], events)


def _copy_state(st: dict) -> dict:
    out = dict(st)
    out["pending_activities"] = [dict(a) for a in st["pending_activities"]]
    out["recent_requests"] = list(st["recent_requests"])
    out["result_waiters"] = list(st["result_waiters"])
    return out


# ---------------------------------------------------------------------------------------------
# helpers


def _event(st: dict, etype: str, attributes: dict, *, request_id: str | None = None, ts: int) -> dict:
    seq = st["next_seq"]
    st["next_seq"] = seq + 1
    return {
        "event_id": new_id(),
        "aggregate_key": st["workflow_id"],
        "run_id": st["run_id"],
        "seq": seq,
        "timestamp_ms": ts,
        "schema_version": 1,
        "trace_id": None,
        "request_id": request_id,
        "attributes": (etype, attributes),
    }


def _emit(view: BatchView, out: Outbox, st: dict, etype: str, attributes: dict, **kw) -> dict:
    ev = _event(st, etype, attributes, **kw)
    view.append(st["workflow_id"], ev)
    out.events.append((st["workflow_id"], ev))
    return ev


def _reply(out: Outbox, request_id: str | None, workflow_id: str, status: str, *, run_id=None,
           message: str = "", result=None, failure=None) -> None:
    if not request_id:
        return
    out.replies.append({
        "request_id": request_id, "workflow_id": workflow_id, "run_id": run_id, "status": status,
        "message": message, "history_offset": None, "result": result, "failure": failure,
        "schema_version": 1,
    })


def _remember(st: dict, request_id: str | None, status: str, message: str = "") -> None:
    if not request_id:
        return
    recent = st["recent_requests"]
    recent.append({"request_id": request_id, "run_id": st["run_id"], "status": status, "message": message})
    if len(recent) > RECENT_REQUESTS:
        del recent[: len(recent) - RECENT_REQUESTS]


def _recent(st: dict | None, request_id: str | None) -> dict | None:
    if st is None or not request_id:
        return None
    for r in reversed(st["recent_requests"]):
        if r["request_id"] == request_id:
            return r
    return None


def _schedule_workflow_task(view: BatchView, out: Outbox, st: dict, ts: int, *, full: bool = False) -> None:
    st["wt_attempt"] = 1
    ev = _emit(view, out, st, "WorkflowTaskScheduled", {"task_queue": st["task_queue"], "attempt": 1}, ts=ts)
    st["wt_scheduled_seq"] = ev["seq"]
    st["wt_needed"] = False
    _dispatch_workflow_task(view, out, st, full=full)


def _dispatch_workflow_task(view: BatchView, out: Outbox, st: dict, *, full: bool) -> None:
    history = view.history(st["workflow_id"], st["run_id"])
    since = 0 if full else st["wt_last_completed_seq"]
    events = [e for e in history if e["seq"] > since]
    out.tasks.append(("workflow", st["task_queue"], {
        "workflow_id": st["workflow_id"], "run_id": st["run_id"], "workflow_type": st["workflow_type"],
        "task_queue": st["task_queue"], "scheduled_seq": st["wt_scheduled_seq"],
        "attempt": st["wt_attempt"], "full_history": since == 0, "events": events,
        "schema_version": 1, "trace_id": None,
    }))


def _close(view: BatchView, out: Outbox, st: dict, status: str, ts: int, *, result=None, failure=None) -> None:
    st["status"] = status
    st["close_time_ms"] = ts
    st["result"] = result
    st["failure"] = failure
    st["wt_scheduled_seq"] = None
    st["wt_needed"] = False
    st["pending_activities"] = []
    for rid in st["result_waiters"]:
        _reply(out, rid, st["workflow_id"], status, run_id=st["run_id"], result=result, failure=failure)
    st["result_waiters"] = []
    log.info("workflow %s run %s %s", st["workflow_id"], st["run_id"], status)


# ---------------------------------------------------------------------------------------------
# transitions


def _start(cmd: dict, body: dict, view: BatchView, out: Outbox, ts: int) -> None:
    wf, rid = cmd["aggregate_key"], cmd["request_id"]
    st = view.state(wf)
    seen = _recent(st, rid)
    if seen is not None:
        out.duplicates += 1
        _reply(out, rid, wf, seen["status"], run_id=seen["run_id"], message=seen["message"])
        return
    if st is not None:
        policy = body["id_reuse_policy"]
        reject = None
        if st["status"] == "running":
            reject = "workflow is already running"
        elif policy == "reject_duplicate":
            reject = "a run with this workflow ID exists and the policy is reject_duplicate"
        elif policy == "allow_duplicate_failed_only" and st["status"] == "completed":
            reject = "the previous run completed and the policy is allow_duplicate_failed_only"
        if reject:
            _remember(st, rid, "already_started", reject)
            view.put(st)
            _reply(out, rid, wf, "already_started", run_id=st["run_id"], message=reject)
            return
    run_id = str(uuid.uuid5(_RUN_NS, cmd["event_id"]))
    new = {
        "workflow_id": wf, "run_id": run_id, "workflow_type": body["workflow_type"],
        "task_queue": body["task_queue"], "status": "running", "start_time_ms": ts,
        "close_time_ms": None, "next_seq": 1, "wt_scheduled_seq": None, "wt_attempt": 0,
        "wt_last_completed_seq": 0, "wt_needed": False, "wt_failure": None, "wt_failure_cause": None,
        "pending_activities": [], "recent_requests": list(st["recent_requests"]) if st else [],
        "result": None, "failure": None, "result_waiters": [], "schema_version": 1,
    }
    view.put(new)
    _emit(view, out, new, "WorkflowExecutionStarted", {
        "workflow_type": body["workflow_type"], "task_queue": body["task_queue"], "input": body["input"],
        "attempt": 1, "continued_from_run_id": None, "parent_workflow_id": None, "parent_run_id": None,
        "run_timeout_ms": body.get("run_timeout_ms"), "build_id": None,
        "search_attributes": body.get("search_attributes") or {},
    }, request_id=rid, ts=ts)
    _schedule_workflow_task(view, out, new, ts, full=True)
    _remember(new, rid, "ok")
    _reply(out, rid, wf, "ok", run_id=run_id)
    log.info("workflow %s run %s started", wf, run_id)


def _current_task(cmd: dict, body: dict, view: BatchView, out: Outbox) -> dict | None:
    """The state if the command's workflow-task token is the pending one, else None (stale)."""
    st = view.state(cmd["aggregate_key"])
    if (st is None or st["run_id"] != cmd["run_id"] or st["status"] != "running"
            or st["wt_scheduled_seq"] != body["scheduled_seq"]):
        out.stale += 1
        return None
    return st


def _workflow_task_completed(cmd: dict, body: dict, view: BatchView, out: Outbox, ts: int) -> None:
    st = _current_task(cmd, body, view, out)
    if st is None:
        return
    done = _emit(view, out, st, "WorkflowTaskCompleted", {
        "scheduled_seq": body["scheduled_seq"], "identity": body["identity"], "build_id": body["build_id"],
    }, ts=ts)
    st["wt_scheduled_seq"] = None
    st["wt_last_completed_seq"] = body["scheduled_seq"]
    st["wt_failure"] = st["wt_failure_cause"] = None
    used = {a["activity_id"] for a in st["pending_activities"]}
    for ctype, c in body["commands"]:
        if st["status"] != "running":
            break  # nothing follows a close
        if ctype == "ScheduleActivityTask":
            if c["activity_id"] in used:
                log.warning("workflow %s run %s: duplicate activity id %s ignored",
                            st["workflow_id"], st["run_id"], c["activity_id"])
                continue
            used.add(c["activity_id"])
            ev = _emit(view, out, st, "ActivityTaskScheduled", {
                "activity_id": c["activity_id"], "activity_type": c["activity_type"], "input": c["input"],
                "options": c["options"], "workflow_task_completed_seq": done["seq"],
            }, ts=ts)
            st["pending_activities"].append({
                "activity_id": c["activity_id"], "activity_type": c["activity_type"],
                "scheduled_seq": ev["seq"], "attempt": 1, "task_queue": c["options"]["task_queue"],
            })
            opts = c["options"]
            out.tasks.append(("activity", opts["task_queue"], {
                "workflow_id": st["workflow_id"], "run_id": st["run_id"], "workflow_type": st["workflow_type"],
                "activity_id": c["activity_id"], "activity_type": c["activity_type"],
                "task_queue": opts["task_queue"], "input": c["input"], "attempt": 1,
                "scheduled_seq": ev["seq"], "scheduled_time_ms": ts,
                "idempotency_key": idempotency_key(st["workflow_id"], st["run_id"], c["activity_id"]),
                "heartbeat_details": None, "start_to_close_timeout_ms": opts.get("start_to_close_timeout_ms"),
                "heartbeat_timeout_ms": opts.get("heartbeat_timeout_ms"), "schema_version": 1, "trace_id": None,
            }))
        elif ctype == "CompleteWorkflowExecution":
            _emit(view, out, st, "WorkflowExecutionCompleted", {"result": c["result"]}, ts=ts)
            _close(view, out, st, "completed", ts, result=c["result"])
        elif ctype == "FailWorkflowExecution":
            _emit(view, out, st, "WorkflowExecutionFailed", {"failure": c["failure"]}, ts=ts)
            _close(view, out, st, "failed", ts, failure=c["failure"])
    if st["status"] == "running" and st["wt_needed"]:
        _schedule_workflow_task(view, out, st, ts)
    view.put(st)


def _workflow_task_failed(cmd: dict, body: dict, view: BatchView, out: Outbox, ts: int) -> None:
    st = _current_task(cmd, body, view, out)
    if st is None:
        return
    # Not recorded in history: the history stays exactly as the workflow's code last agreed with.
    # The failure is on the state for operators; the next event schedules a new attempt.
    st["wt_scheduled_seq"] = None
    st["wt_failure"] = body["failure"]
    st["wt_failure_cause"] = body["cause"]
    view.put(st)
    log.warning("workflow %s run %s: workflow task failed (%s): %s", st["workflow_id"], st["run_id"],
                body["cause"], body["failure"]["type"])


def _history_requested(cmd: dict, body: dict, view: BatchView, out: Outbox, ts: int) -> None:
    st = _current_task(cmd, body, view, out)
    if st is None:
        return
    _dispatch_workflow_task(view, out, st, full=True)


def _activity_result(cmd: dict, body: dict, view: BatchView, out: Outbox, ts: int, *, failed: bool) -> None:
    st = view.state(cmd["aggregate_key"])
    pending = None
    if st is not None and st["status"] == "running" and st["run_id"] == cmd["run_id"]:
        for a in st["pending_activities"]:
            if (a["activity_id"] == body["activity_id"] and a["scheduled_seq"] == body["scheduled_seq"]
                    and a["attempt"] == body["attempt"]):
                pending = a
    if pending is None:
        out.stale += 1
        return
    st["pending_activities"].remove(pending)
    common = {"activity_id": body["activity_id"], "scheduled_seq": body["scheduled_seq"],
              "attempt": body["attempt"], "identity": body["identity"]}
    if failed:
        _emit(view, out, st, "ActivityTaskFailed", {**common, "failure": body["failure"]}, ts=ts)
    else:
        _emit(view, out, st, "ActivityTaskCompleted", {**common, "result": body["result"]}, ts=ts)
    if st["wt_scheduled_seq"] is None:
        _schedule_workflow_task(view, out, st, ts)
    else:
        st["wt_needed"] = True
    view.put(st)


def _await_result(cmd: dict, body: dict, view: BatchView, out: Outbox, ts: int) -> None:
    wf, rid = cmd["aggregate_key"], cmd["request_id"]
    st = view.state(wf)
    if st is None or (cmd["run_id"] and cmd["run_id"] != st["run_id"]):
        _reply(out, rid, wf, "not_found", message=f"workflow {wf!r} not found")
        return
    if st["status"] != "running":
        _reply(out, rid, wf, st["status"], run_id=st["run_id"], result=st["result"], failure=st["failure"])
    elif not body["wait"]:
        # a running workflow whose last workflow task failed (e.g. non-determinism) says so
        _reply(out, rid, wf, "running", run_id=st["run_id"], message=st["wt_failure_cause"] or "",
               failure=st["wt_failure"])
    elif rid and rid not in st["result_waiters"]:
        st["result_waiters"].append(rid)
        if len(st["result_waiters"]) > MAX_RESULT_WAITERS:
            del st["result_waiters"][0]
        view.put(st)


def transition(cmd: dict, view: BatchView, out: Outbox, ts: int | None = None) -> None:
    """Apply one decoded ``Command`` to the shard."""
    ts = now_ms() if ts is None else ts
    btype, body = cmd["body"]
    if btype == "StartWorkflow":
        _start(cmd, body, view, out, ts)
    elif btype == "RespondWorkflowTaskCompleted":
        _workflow_task_completed(cmd, body, view, out, ts)
    elif btype == "RespondWorkflowTaskFailed":
        _workflow_task_failed(cmd, body, view, out, ts)
    elif btype == "RequestWorkflowHistory":
        _history_requested(cmd, body, view, out, ts)
    elif btype == "RespondActivityTaskCompleted":
        _activity_result(cmd, body, view, out, ts, failed=False)
    elif btype == "RespondActivityTaskFailed":
        _activity_result(cmd, body, view, out, ts, failed=True)
    elif btype == "AwaitWorkflowResult":
        _await_result(cmd, body, view, out, ts)
    else:  # pragma: no cover - the schema's union admits nothing else
        raise ValueError(f"unknown command {btype}")


def history_record_key(workflow_id: str, event: dict) -> str:
    return history_key(workflow_id, event["run_id"], event["seq"])
