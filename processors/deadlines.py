"""Processor-local deadlines: the activity timeouts of a shard's workflows (decision 0026).

An activity's start-to-close (with schedule-to-start), heartbeat and schedule-to-close limits
are not durable timers on the delay topics: each is a pure function of the workflow's state
(``activity_deadlines``), which the processor already holds for its shards and which Kafka
already keeps durable in ``{ns}.state``. The processor indexes them per shard in memory
(``DeadlineIndex``): after every committed batch for the workflows it touched, on restore for
every workflow read back. When one is due it processes a ``FireTimer`` command for it in its
next transaction, exactly as if the timer service had sent it.

So the common case, an activity that completes in time, writes no timer record and no
``FireTimer`` command at all (before: one record per attempt, copied down the delay tiers, then a
stale ``FireTimer`` through ``{ns}.commands`` and a transaction, for every activity). Nothing is
lost on a crash: the deadline is in the committed state, and the next owner of the shard
rebuilds the index from it while it restores. Retry backoff, user timers, workflow-task retries
and run/execution timeouts stay on the timer service (they are not derivable from the state, or
they last long enough that a heap entry per workflow would be wasted memory).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable
from typing import Any

from kadence.schemas.records import WorkflowState

from .activities import options_of
from .effects import activity_waiting_for

__all__ = ["LOCAL_KINDS", "DeadlineIndex", "activity_deadlines"]

log = logging.getLogger(__name__)

#: FireTimer kinds whose deadlines the processor keeps itself
LOCAL_KINDS = frozenset({"activity_timeout", "heartbeat_timeout", "schedule_to_close"})


def _body(timer_id: str, fire_at_ms: int, kind: str, seq: int, attempt: int) -> dict[str, Any]:
    return {"timer_id": timer_id, "fire_at_ms": fire_at_ms, "kind": kind, "scheduled_seq": seq, "attempt": attempt}


def activity_deadlines(st: WorkflowState | None) -> list[dict[str, Any]]:
    """The pending activity timeouts of a workflow state, as ``FireTimer`` bodies.

    The timer IDs and attempts are what ``activities.activity_timer_fired`` checks, so a deadline
    of an attempt that is over is recognised as stale wherever it comes from."""
    if st is None or st["status"] != "running" or st["paused"]:
        return []  # a paused run's deadlines are armed again when it is unpaused (processors.pause)
    out: list[dict[str, Any]] = []
    for a in st["pending_activities"]:
        seq, opts = a["scheduled_seq"], options_of(a)
        s2c = opts.get("schedule_to_close_timeout_ms")
        if s2c:
            out.append(_body(f"a{seq}.s2c", a["first_scheduled_ms"] + s2c, "schedule_to_close", seq, 0))
        if a["retrying"] or activity_waiting_for(a) is not None:
            # between attempts: only the retry-backoff timer (timer service) is armed; waiting
            # for a concurrency slot: no attempt is out yet
            continue
        attempt = a["attempt"]
        # a start-to-close limit also bounds the time waiting for a worker (no "started" round trip)
        stc, sts = opts.get("start_to_close_timeout_ms"), opts.get("schedule_to_start_timeout_ms")
        if stc or sts:
            out.append(
                _body(
                    f"a{seq}.{attempt}.stc",
                    a["attempt_started_ms"] + (stc or 0) + (sts or 0),
                    "activity_timeout",
                    seq,
                    attempt,
                )
            )
        hb = opts.get("heartbeat_timeout_ms")
        if hb:
            last = max(a["last_heartbeat_ms"], a["attempt_started_ms"])
            out.append(_body(f"a{seq}.{attempt}.hb", last + hb, "heartbeat_timeout", seq, attempt))
    return out


class DeadlineIndex:
    """One shard's pending activity deadlines, earliest first.

    ``update(workflow_id, state)`` replaces a workflow's deadlines with those of its new state
    (called with committed states only). ``due(now)`` hands out the deadlines that have passed,
    each once; the caller reports the batch's outcome with ``settle``: after a commit, a
    deadline that the state still carries unchanged was ignored by the state machine and is not
    handed out again (a guard against a firing loop); after an abort, all come back.
    """

    def __init__(self) -> None:
        #: (fire_at_ms, workflow_id, timer_id); entries that no longer match ``_current`` are skipped
        self._heap: list[tuple[int, str, str]] = []
        #: workflow_id -> {timer_id: (body, run_id)}
        self._current: dict[str, dict[str, tuple[dict[str, Any], str]]] = {}
        #: (workflow_id, timer_id) -> fire_at_ms handed out by ``due`` and not settled yet
        self._firing: dict[tuple[str, str], int] = {}
        #: (workflow_id, timer_id) -> fire_at_ms fired and committed, still derived: never again
        self._spent: dict[tuple[str, str], int] = {}

    def __len__(self) -> int:
        return sum(len(d) for d in self._current.values())

    def update(self, workflow_id: str, state: WorkflowState | None) -> None:
        new = activity_deadlines(state)
        old = self._current.pop(workflow_id, None) or {}
        ids = {b["timer_id"] for b in new}
        for timer_id in old:
            if timer_id not in ids:
                self._spent.pop((workflow_id, timer_id), None)
        if not new or state is None:  # (no deadlines without a state)
            return
        mine = self._current[workflow_id] = {}
        for body in new:
            tid = body["timer_id"]
            mine[tid] = (body, state["run_id"])
            prev = old.get(tid)
            if prev is None or prev[0]["fire_at_ms"] != body["fire_at_ms"] or prev[1] != state["run_id"]:
                heapq.heappush(self._heap, (body["fire_at_ms"], workflow_id, tid))

    def _live(self, entry: tuple[int, str, str]) -> tuple[dict[str, Any], str] | None:
        fire_at, wf, tid = entry
        cur = self._current.get(wf, {}).get(tid)
        if cur is None or cur[0]["fire_at_ms"] != fire_at:
            return None
        key = (wf, tid)
        if self._firing.get(key) == fire_at or self._spent.get(key) == fire_at:
            return None
        return cur

    def next_due_ms(self) -> int | None:
        """The earliest pending deadline (ms since the epoch), or None."""
        heap = self._heap
        while heap and self._live(heap[0]) is None:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def due(self, now_ms: int, limit: int) -> list[tuple[str, str, dict[str, Any]]]:
        """Up to ``limit`` deadlines at or before ``now_ms`` as (workflow_id, run_id, FireTimer body)."""
        out: list[tuple[str, str, dict[str, Any]]] = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms and len(out) < limit:
            entry = heapq.heappop(heap)
            cur = self._live(entry)
            if cur is None:
                continue
            body, run_id = cur
            self._firing[(entry[1], entry[2])] = entry[0]
            out.append((entry[1], run_id, body))
        return out

    def settle(
        self,
        fired: list[tuple[str, str, dict[str, Any]]],
        committed: bool,
        state_of: Callable[[str], WorkflowState | None],
    ) -> None:
        """After the batch that carried ``fired``: ``state_of(workflow_id)`` reads the committed state."""
        for wf, _run_id, body in fired:
            key = (wf, body["timer_id"])
            fire_at = self._firing.pop(key, None)
            if fire_at is None:
                continue
            if not committed:
                heapq.heappush(self._heap, (fire_at, wf, body["timer_id"]))
                continue
            self.update(wf, state_of(wf))
            cur = self._current.get(wf, {}).get(body["timer_id"])
            if cur is not None and cur[0]["fire_at_ms"] == fire_at:
                self._spent[key] = fire_at
                log.warning(
                    "workflow %s run %s: deadline %s (%s) fired and was ignored; not firing it again",
                    wf,
                    cur[1],
                    body["timer_id"],
                    body["kind"],
                )
