"""Concurrency limits (decision 0057): a run or an activity holds a slot of each limit it names
while it executes; past a limit's ``max`` it waits, first come first served.

Each limit key (``name=value``) is owned by the partition of the commands topic its key hashes
to. Its holders and waiters are a ``ConcurrencyState`` record in that shard (topic
``{ns}.concurrency``, written in the shard's transactions). A holder's workflow asks for and
returns slots with ``ConcurrencySlot`` commands (``acquire``, ``release``) produced in the
transaction of the transition that needs them; the owner answers with ``grant`` (or ``refuse``,
when the key's queue is full) in the transaction that admits it. Every step is one transition of
one shard, so a slot is granted exactly once and returned exactly once, across processor crashes
and partition moves, with no lock service.

A run acquires its limits one after another in key order (two runs never wait for each other's
slots), holds them across continue-as-new and cron runs, and returns them when the chain closes;
its first workflow task waits until it holds them all. An activity does the same from its
scheduling to its close (across its retries); its attempts are dispatched once it holds them all.
A slot is identified by its holder (the workflow ID) and a ticket (the run chain's, or the run's
and the activity's ID), so a late grant of a request that was returned since changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from kadence.schemas.records import (
    ConcurrencyLimit,
    ConcurrencySlot,
    ConcurrencyState,
    Failure,
    PendingActivity,
    SlotHolder,
    WorkflowState,
)
from kadence.topics.concurrency import command_key, limit_key, slot_id, sorted_limits
from kadence.topics.records import failure_record

from .effects import (
    Transition,
    activity_waiting_for,
    emit,
    reply,
    schedule_workflow_task,
    send_command,
    start_timer,
    waiting_for,
)

__all__ = [
    "MAX_QUEUE_BYTES",
    "begin_activity_slots",
    "begin_run_slots",
    "concurrency_command",
    "release_activity_slots",
    "release_run_slots",
]

log = logging.getLogger(__name__)

#: a key's holders and waiters are one record; a request that would take it past this size is
#: refused (the requester fails with ``ConcurrencyQueueFull``) rather than the record growing
#: past what the broker accepts (about 5,000 waiters of 60-byte workflow IDs)
MAX_QUEUE_BYTES = 512 * 1024
#: (transition, state, failure): fail the run (``state_machine``: emit the failure, close the run)
FailRun = Callable[[Transition, WorkflowState, Failure], None]
#: (transition, state, activity): send an activity's attempt (``activities.dispatch_attempt``)
Dispatch = Callable[[Transition, WorkflowState, PendingActivity], None]
#: (transition, state, activity, failure): fail an activity for good (``activities``)
FailActivity = Callable[[Transition, WorkflowState, PendingActivity, Failure], None]


def _send(t: Transition, kind: str, lim: ConcurrencyLimit | ConcurrencySlot, **fields: Any) -> None:
    body: ConcurrencySlot = {
        "kind": kind,
        "name": lim["name"],
        "value": lim["value"],
        "max": lim.get("max", 0),
        "holder": fields.pop("holder"),
        "ticket": fields.pop("ticket"),
        "activity_id": fields.pop("activity_id", None),
        "requested_ms": fields.pop("requested_ms", 0),
        "message": fields.pop("message", ""),
        "per_ms": lim.get("per_ms"),
        "not_before_ms": fields.pop("not_before_ms", 0),
    }
    to = body["holder"] if kind in ("grant", "refuse") else command_key(lim["name"], lim["value"], body["per_ms"])
    send_command(t.out, to, "ConcurrencySlot", dict(body))


# -- the holder's side: runs --------------------------------------------------------------------


def begin_run_slots(t: Transition, st: WorkflowState, limits: Iterable[ConcurrencyLimit]) -> None:
    """A new run chain that names limits: asks for the first one's slot (before ``begin_run``,
    whose first workflow task then waits: ``effects.schedule_workflow_task``)."""
    st["concurrency"] = sorted_limits(limits)
    st["slots_held"] = 0
    st["slot_ticket"] = st["run_id"] if st["concurrency"] else None
    _request_run_slot(t, st)


def _request_run_slot(t: Transition, st: WorkflowState) -> None:
    want = waiting_for(st)
    if want is None:
        st["slot_wait_since_ms"] = None
        return
    st["slot_wait_since_ms"] = t.ts
    _send(t, "acquire", want, holder=st["workflow_id"], ticket=st["slot_ticket"], requested_ms=t.ts)


def release_run_slots(t: Transition, st: WorkflowState) -> None:
    """The chain closed: its slots, and the one it waits for, go back (to a queue the owner
    drops it from)."""
    ticket = st.get("slot_ticket")
    if ticket:
        wanted = st["concurrency"][: min(st["slots_held"] + 1, len(st["concurrency"]))]
        for lim in wanted:
            _send(t, "release", lim, holder=st["workflow_id"], ticket=ticket)
    st["slots_held"] = 0
    st["slot_ticket"] = None
    st["slot_wait_since_ms"] = None
    for a in st["pending_activities"]:
        release_activity_slots(t, st, a)


def _run_granted(t: Transition, st: WorkflowState, body: ConcurrencySlot) -> bool:
    want = waiting_for(st)
    if want is None or slot_id(want) != slot_id(body):
        return False  # granted before (a resent grant): nothing to do
    st["slots_held"] += 1
    not_before = _not_before(t, body)
    _acquired(t, st, want, st.get("slot_wait_since_ms"), None, body)
    if not_before is not None:  # a rate limit's admission: the first workflow task waits for it
        st["throttled_until_ms"] = max(st.get("throttled_until_ms") or 0, not_before)
        st["first_task_at_ms"] = max(st.get("first_task_at_ms") or 0, not_before)
        start_timer(t.out, st, f"throttle.{st['run_id']}.{st['slots_held']}", not_before, "cron_start")
    _request_run_slot(t, st)
    if waiting_for(st) is None and st["wt_scheduled_seq"] is None:
        schedule_workflow_task(t, st, full=True)  # waits still for a pause or a cron time
    return True


def _not_before(t: Transition, body: ConcurrencySlot) -> int | None:
    """A rate limit's admission time, when it is still to come (None: start now)."""
    at = body.get("not_before_ms") or 0
    return at if at > t.ts else None


def _acquired(
    t: Transition,
    st: WorkflowState,
    lim: ConcurrencyLimit,
    since_ms: int | None,
    activity_id: str | None,
    grant: ConcurrencySlot,
) -> None:
    """Record a slot the run (or one of its activities) now holds (or a rate limit's admission,
    at the time its owner gave it), and how long it waited for it."""
    waited = max(0, t.ts - (since_ms or t.ts))
    t.out.slot_waits.append((lim["name"], waited))
    if lim.get("per_ms") is not None:
        t.out.throttled.append((lim["name"], max(0, (grant.get("not_before_ms") or t.ts) - (since_ms or t.ts))))
    emit(
        t,
        st,
        "ConcurrencySlotAcquired",
        {
            "name": lim["name"],
            "value": lim["value"],
            "max": lim["max"],
            "waited_ms": waited,
            "activity_id": activity_id,
            "not_before_ms": (grant.get("not_before_ms") or t.ts) if lim.get("per_ms") is not None else None,
            "per_ms": lim.get("per_ms"),
        },
    )


# -- the holder's side: activities --------------------------------------------------------------


def _activity_ticket(st: WorkflowState, a: PendingActivity) -> str:
    return f"{st['run_id']}/{a['activity_id']}"


def _activity_limits(a: PendingActivity) -> list[ConcurrencyLimit]:
    opts = a["options"]
    return list(opts.get("concurrency") or []) if opts is not None else []


def begin_activity_slots(t: Transition, st: WorkflowState, a: PendingActivity) -> bool:
    """A newly scheduled activity: True if it may be dispatched now (it names no limit), else
    its first slot is asked for and its dispatch waits (``activity_granted``)."""
    a["slots_held"] = 0
    opts = a["options"]
    if opts is not None:
        limits = list(opts.get("concurrency") or ())
        rules = t.view.queue_limits.get(opts["task_queue"])
        if rules is not None:  # the queue's concurrency rules, set by its operators
            named = {(lim["name"], lim["value"]) for lim in limits}
            limits += [r for r in rules.concurrency_of(a["activity_type"]) if (r["name"], r["value"]) not in named]
        if limits:
            a["options"] = {**opts, "concurrency": sorted_limits(limits)}
    return not _request_activity_slot(t, st, a)


def _request_activity_slot(t: Transition, st: WorkflowState, a: PendingActivity) -> bool:
    want = activity_waiting_for(a)
    if want is None:
        return False
    _send(
        t,
        "acquire",
        want,
        holder=st["workflow_id"],
        ticket=_activity_ticket(st, a),
        activity_id=a["activity_id"],
        requested_ms=t.ts,
    )
    return True


def release_activity_slots(t: Transition, st: WorkflowState, a: PendingActivity) -> None:
    """The activity closed (or its run did): its slots and the one it waits for go back."""
    limits = _activity_limits(a)
    for lim in limits[: min(a.get("slots_held", 0) + 1, len(limits))]:
        _send(t, "release", lim, holder=st["workflow_id"], ticket=_activity_ticket(st, a), activity_id=a["activity_id"])
    a["slots_held"] = 0


def _activity_granted(t: Transition, st: WorkflowState, body: ConcurrencySlot, dispatch: Dispatch) -> bool:
    a = next((x for x in st["pending_activities"] if _activity_ticket(st, x) == body["ticket"]), None)
    if a is None:
        _stale(t, body)  # the activity closed since
        return True
    want = activity_waiting_for(a)
    if want is None or slot_id(want) != slot_id(body):
        return False  # granted before: nothing to do
    a["slots_held"] = a.get("slots_held", 0) + 1
    not_before = _not_before(t, body)
    _acquired(t, st, want, body.get("requested_ms"), a["activity_id"], body)
    if not_before is not None:  # a rate limit's admission: the first attempt waits for it
        a["next_attempt_ms"] = max(a.get("next_attempt_ms") or 0, not_before)
    if not _request_activity_slot(t, st, a):
        _admitted(t, st, a, dispatch)
    return True


def _admitted(t: Transition, st: WorkflowState, a: PendingActivity, dispatch: Dispatch) -> None:
    """The activity holds all its slots: its first attempt now, or at its rate limits'
    admission time (a retry-backoff timer, so a waiting activity is what a retrying one is: no
    attempt out, cancelled at once, its timeouts not armed)."""
    at = a.get("next_attempt_ms")
    if at is None or at <= t.ts:
        a["next_attempt_ms"] = None
        dispatch(t, st, a)
        return
    a["retrying"] = True
    a["throttled"] = True
    start_timer(
        t.out,
        st,
        f"a{a['scheduled_seq']}.{a['attempt']}.throttle",
        at,
        "retry_backoff",
        scheduled_seq=a["scheduled_seq"],
        attempt=a["attempt"],
    )


# -- the commands -------------------------------------------------------------------------------


def concurrency_command(
    t: Transition,
    body: ConcurrencySlot,
    *,
    fail: FailRun,
    dispatch: Dispatch,
    fail_activity: FailActivity,
) -> None:
    """A ``ConcurrencySlot`` command: at a limit's owner (acquire, release) or at a holder's
    workflow (grant, refuse). ``fail`` closes a run whose request was refused, ``fail_activity``
    an activity's; ``dispatch`` sends an activity's attempt once it holds its slots."""
    if body["kind"] in ("acquire", "release", "set"):
        _owner(t, body)
        return
    st = t.view.state(body["holder"])
    activity = body.get("activity_id")
    if st is None or st["status"] != "running" or (activity is None and st.get("slot_ticket") != body["ticket"]):
        _stale(t, body)  # a request of a chain that closed
        return
    if body["kind"] == "refuse":
        _refused(t, st, body, fail, fail_activity)
    elif activity is None:
        if not _run_granted(t, st, body):
            t.out.stale += 1
    elif not _activity_granted(t, st, body, dispatch):
        t.out.stale += 1
    t.view.put(st)


def _stale(t: Transition, body: ConcurrencySlot) -> None:
    """A grant or refusal for a request whose run or activity has closed since. Its close sent a
    release; a grant is given back once more all the same, because a release applied in the same
    batch (``routing.InlineDelivery``) can overtake an acquire still on the topic, which the
    owner would then queue and grant to no one. A release of what the owner does not hold
    changes nothing."""
    t.out.stale += 1
    if body["kind"] == "grant":
        _send(t, "release", body, holder=body["holder"], ticket=body["ticket"], activity_id=body.get("activity_id"))


def _refused(
    t: Transition, st: WorkflowState, body: ConcurrencySlot, fail: FailRun, fail_activity: FailActivity
) -> None:
    failure = failure_record("ConcurrencyQueueFull", body["message"])
    if body.get("activity_id") is None:
        fail(t, st, failure)
        return
    # an activity's request: the activity fails (its slots go back); the workflow's code decides
    a = next((x for x in st["pending_activities"] if _activity_ticket(st, x) == body["ticket"]), None)
    if a is None:
        t.out.stale += 1
    else:
        fail_activity(t, st, a, failure)


# -- the owner's side ---------------------------------------------------------------------------


def _entry_bytes(e: SlotHolder) -> int:
    return len(e["holder"]) + len(e["ticket"]) + len(e.get("activity_id") or "") + 16


def _new_state(body: ConcurrencySlot, ts: int) -> ConcurrencyState:
    """The record of a key used for the first time (a rate limit's with its window)."""
    return {
        "name": body["name"],
        "value": body["value"],
        "max": max(1, body.get("max", 1)),
        "holders": [],
        "waiters": [],
        "granted": 0,
        "updated_ms": ts,
        "per_ms": body.get("per_ms"),
        "recent_ms": [],
    }


def _set_max(t: Transition, key: str, body: ConcurrencySlot) -> None:
    """An operator's max for the key (``kadence limits set``; 0 lifts it): it applies instead of
    the max the requests name until lifted; the record keeps who, when and why; audited. A
    higher max admits waiters at once; a lower one admits no one until the holders are below it."""
    cs = t.view.limit(key) or _new_state(body, t.ts)
    top = body.get("max") or 0
    cs["override_max"] = top or None
    cs["override_by"], cs["override_reason"], cs["override_ms"] = body["holder"], body["message"], t.ts
    if top:
        cs["max"] = top
    if cs.get("per_ms") is None:
        _admit(t, cs)
    cs["updated_ms"] = t.ts
    t.view.put_limit(key, cs)
    what = f"set to {top}" if top else "lifted (the requests' max applies)"
    log.warning("audit: the max of limit %r %s by %r: %r", key, what, body["holder"], body["message"])
    reply(t.out, t.cmd["request_id"], key, "ok", message=f"the max of {key} {what}")


def _owner(t: Transition, body: ConcurrencySlot) -> None:
    key = t.cmd["aggregate_key"]
    if body["kind"] == "set":
        _set_max(t, key, body)
        return
    if body.get("per_ms") is not None:
        _rate_owner(t, key, body)
        return
    cs = t.view.limit(key) or _new_state(body, t.ts)
    who = (body["holder"], body["ticket"])
    holders, waiters = cs["holders"], cs["waiters"]
    if body["kind"] == "acquire":
        if body.get("max") and cs.get("override_max") is None:
            cs["max"] = body["max"]  # the latest request's limit applies (unless an operator's)
        held = next((h for h in holders if (h["holder"], h["ticket"]) == who), None)
        if held is not None:  # asked again: the grant again (the holder ignores what it has)
            _send(t, "grant", cs, holder=held["holder"], ticket=held["ticket"], activity_id=held.get("activity_id"))
        elif not any((w["holder"], w["ticket"]) == who for w in waiters):
            entry: SlotHolder = {
                "holder": body["holder"],
                "ticket": body["ticket"],
                "activity_id": body.get("activity_id"),
                "since_ms": body.get("requested_ms") or t.ts,
            }
            queued = sum(_entry_bytes(e) for e in holders) + sum(_entry_bytes(e) for e in waiters)
            if waiters and queued + _entry_bytes(entry) > MAX_QUEUE_BYTES:
                t.out.slots_refused.append(cs["name"])
                _send(
                    t,
                    "refuse",
                    cs,
                    holder=body["holder"],
                    ticket=body["ticket"],
                    activity_id=body.get("activity_id"),
                    message=f"concurrency limit {limit_key(cs['name'], cs['value'])} has {len(waiters)} waiting: "
                    "its queue is full",
                )
            else:
                waiters.append(entry)
    else:
        cs["holders"] = [h for h in holders if (h["holder"], h["ticket"]) != who]
        cs["waiters"] = [w for w in waiters if (w["holder"], w["ticket"]) != who]
    _admit(t, cs)
    cs["updated_ms"] = t.ts
    t.view.put_limit(key, cs)


def _admit(t: Transition, cs: ConcurrencyState) -> None:
    """Grant the first waiters while the key has free slots."""
    while cs["waiters"] and len(cs["holders"]) < cs["max"]:
        w = cs["waiters"].pop(0)
        cs["holders"].append({**w, "since_ms": t.ts})
        cs["granted"] = cs.get("granted", 0) + 1
        t.out.slots_granted.append(cs["name"])
        _send(
            t,
            "grant",
            cs,
            holder=w["holder"],
            ticket=w["ticket"],
            activity_id=w.get("activity_id"),
            requested_ms=w["since_ms"],
        )


def _rate_owner(t: Transition, key: str, body: ConcurrencySlot) -> None:
    """A rate limit's owner: each request is admitted at once, at the earliest time that keeps
    every window of ``per_ms`` to at most ``max`` admissions (the ``max``-th latest admission
    plus ``per_ms``), in the order the requests came; the grant names that time and the holder
    waits for it. Nothing is held, so a release changes nothing (an unused future admission
    keeps its place)."""
    if body["kind"] != "acquire":
        return
    rs = t.view.limit(key) or _new_state(body, t.ts)
    rs["per_ms"] = per = body["per_ms"] or 1  # the latest request's window applies
    if rs.get("override_max") is None:
        rs["max"] = max(1, body.get("max", 1))  # and its max, unless an operator's
    top = rs["max"]
    recent = [x for x in rs.get("recent_ms") or () if x > t.ts - per]  # older ones bind no one
    at = max([t.ts, *recent[-1:]])  # never before an earlier admission (a clock behind)
    if len(recent) >= top:
        at = max(at, recent[-top] + per)
    rs["recent_ms"] = [*recent, at][-top:]
    rs["granted"] = rs.get("granted", 0) + 1
    rs["updated_ms"] = t.ts
    t.out.slots_granted.append(rs["name"])
    _send(
        t,
        "grant",
        rs,
        holder=body["holder"],
        ticket=body["ticket"],
        activity_id=body.get("activity_id"),
        requested_ms=body.get("requested_ms") or t.ts,
        not_before_ms=at,
    )
    t.view.put_limit(key, rs)
