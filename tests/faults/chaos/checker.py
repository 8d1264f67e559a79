"""Invariants of a chaos run, checked over what it left behind (pure logic, no Kafka, no Redis).

Inputs: what the load driver had accepted (``Expectations``) and what the run left behind
(``Observations``: the history topic, the dead-letter topic, the activities' Redis records).
``check()`` returns every violation, ordered by invariant, each with the workflow IDs concerned;
``assert_clean()`` fails with the first one.

The invariants (docs/fault-testing.md):

1. ``history``: every run's events have seqs 1..n in topic order, no gap, no duplicate; one result
   per activity, one close per run.
2. ``completion``: every accepted start has exactly one run, closed by exactly one
   ``WorkflowExecutionCompleted`` with the right result; every child likewise; no run that
   nobody started.
3. ``replay``: every closed run replays through the SDK's ``Replayer`` with no non-determinism
   (the code produces exactly the recorded commands).
4. ``activity``: each scheduled activity has one result; its business effect happened exactly
   once (the Redis ledger has its idempotency key once, and no key history does not know);
   the attempts workers ran are the attempts history dispatched (1..final, the final one ran).
5. ``signal``: every accepted signal request is in history exactly once, on its workflow (a
   copy a continue-as-new carried into the next run, decision 0053, is the same one); no
   signal in history that nobody sent. ``update``: every answered update is accepted exactly
   once and completed exactly once in its workflow's history; a rejected one is not there; no
   update in history that nobody sent.
6. ``timer``: no ``TimerFired`` before its ``TimerStarted.fire_at_ms``, none twice, none lost
   (every timer of a completed run fired or was canceled).
7. ``dead_letter``: every undecodable record produced to the commands topic is in the
   dead-letter topic with an "undecodable" reason.
9. ``pause``: in every run, ``WorkflowExecutionPaused`` and ``WorkflowExecutionUnpaused`` alternate
   (a pause first), each request at most once and only from a request the driver sent; while
   paused, no workflow task is scheduled, no timer fires and no activity times out.
10. ``stream``: every record of {ns}.streams (read_committed) was accepted once, by the event it
   names: a workflow's value by its ``StreamRecordPublished`` (each has exactly one record), an
   activity's by the ``ActivityTaskCompleted`` of that attempt, whose values are exactly that
   attempt's (never a failed or timed-out attempt's); one end record, last, for a run that
   published and closed.
8. ``verify``: ``kadence verify``'s state and reply checks (``test_chaos.py`` adds them): every
   workflow's latest state agrees with its history, and no accepted request is answered twice
   differently.

The history, activity-result and timer checks are ``kadence verify``'s own
(``kadence.connectors.verify.HistoryChecker``), so the suite and the operator's tool agree.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kadence import NonDeterminismError, Replayer
from kadence.connectors.verify import HistoryChecker
from kadence.topics.payload import JsonConverter
from kadence.topics.records import CLOSE_EVENTS
from kadence.topics.schedules import SCHEDULE_ID_PREFIX
from kadence.topics.standalone import is_activity_key
from kadence.topics.streams import StreamEntry

from .concurrency_check import slot_violations
from .workflows import charge_values

__all__ = ["INVARIANTS", "Expectations", "Observations", "Violation", "assert_clean", "check", "summarize"]

INVARIANTS = (
    "history",
    "completion",
    "replay",
    "activity",
    "signal",
    "update",
    "timer",
    "dead_letter",
    "verify",
    "pause",
    "cron",
    "schedule",
    "concurrency",
    "stream",
)
_CLOSES = tuple(CLOSE_EVENTS)
_ACTIVITY_RESULTS = ("ActivityTaskCompleted", "ActivityTaskFailed", "ActivityTaskTimedOut", "ActivityTaskCanceled")

_conv = JsonConverter()


@dataclass
class Expectations:
    """What the driver was told was accepted."""

    #: workflow ID -> the result it must complete with
    results: dict[str, object] = field(default_factory=dict)
    #: workflow ID -> run ID of the accepted start (the reply's)
    run_ids: dict[str, str] = field(default_factory=dict)
    #: request ID of every accepted signal -> its workflow ID
    signals: dict[str, str] = field(default_factory=dict)
    #: request ID of every update answered with its result -> its workflow ID
    updates: dict[str, str] = field(default_factory=dict)
    #: request ID of every update its validator rejected -> its workflow ID
    rejected_updates: dict[str, str] = field(default_factory=dict)
    #: (key, value) of every undecodable record produced to the commands topic
    garbage: list[tuple[bytes | None, bytes]] = field(default_factory=list)
    #: request ID of every pause and unpause request the driver sent -> its workflow ID
    pauses: dict[str, str] = field(default_factory=dict)
    #: cron workflow ID -> the run ID of its accepted start (the chain's first run)
    crons: dict[str, str] = field(default_factory=dict)
    #: the cron workflows' schedule period (ms): every run's time is a multiple of it
    cron_period_ms: int = 0
    #: the schedules created (their IDs) and their interval (ms)
    schedules: list[str] = field(default_factory=list)
    schedule_every_ms: int = 0
    #: accepted starts that named a concurrency limit (``workflows.run_limits``)
    limited_runs: int = 0


@dataclass
class Observations:
    """What the run left behind."""

    #: (workflow_id, run_id) -> HistoryEvent records in topic order
    histories: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    #: DeadLetter records of the dead-letter topic
    dead_letters: list[dict] = field(default_factory=list)
    #: idempotency keys in the order their effect was applied (the Redis ledger)
    ledger: list[str] = field(default_factory=list)
    #: (idempotency key, attempt) for every execution of an attempt by a worker
    attempts: list[tuple[str, int]] = field(default_factory=list)
    #: the records of {ns}.streams, committed only, in offset order per partition
    streams: list[StreamEntry] = field(default_factory=list)


@dataclass(frozen=True)
class Violation:
    invariant: str
    message: str
    workflow_ids: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"[{self.invariant}] {self.message} (workflows: {', '.join(self.workflow_ids) or '-'})"


def _kind(e: dict) -> str:
    return e["attributes"][0]


def _attrs(e: dict) -> dict:
    return e["attributes"][1]


# ---------------------------------------------------------------- 1. history


def _engine_gaps(obs: Observations) -> list:
    """What ``kadence verify`` finds in these histories (one implementation of the history,
    activity-result and timer checks: ``kadence.connectors.verify``)."""
    found = HistoryChecker()
    for _key, events in sorted(obs.histories.items()):
        for e in events:
            found.add(e)
    return found.gaps


def check_history(obs: Observations, gaps: list | None = None) -> list[Violation]:
    """``gaps``: ``_engine_gaps(obs)`` when the caller has it (``check`` computes it once)."""
    return [
        Violation("history", f"run {g.run_id}: {g.message}", (g.workflow_id,))
        for g in (_engine_gaps(obs) if gaps is None else gaps)
        if g.check in ("history", "activity")
    ]


# ---------------------------------------------------------------- 2. completion


def _runs_by_workflow(obs: Observations) -> dict[str, list[str]]:
    runs: dict[str, list[str]] = collections.defaultdict(list)
    for wf, run in obs.histories:
        runs[wf].append(run)
    return runs


def _children(obs: Observations) -> dict[str, str]:
    """child workflow ID -> parent workflow ID, from the parents' histories."""
    out = {}
    for (wf, _run), events in obs.histories.items():
        for e in events:
            if _kind(e) == "StartChildWorkflowExecutionInitiated":
                out[_attrs(e)["workflow_id"]] = wf
    return out


def _completions(events: list[dict]) -> list[dict]:
    return [e for e in events if _kind(e) == "WorkflowExecutionCompleted"]


def check_completion(exp: Expectations, obs: Observations) -> list[Violation]:
    out = []
    runs = _runs_by_workflow(obs)
    children = _children(obs)
    for wf in sorted(exp.results):
        have = runs.get(wf, [])
        if not have:
            out.append(Violation("completion", "accepted start has no run in history", (wf,)))
            continue
        if len(have) > 1:
            out.append(Violation("completion", f"accepted start has {len(have)} runs: {sorted(have)}", (wf,)))
            continue
        run = have[0]
        if wf in exp.run_ids and exp.run_ids[wf] != run:
            out.append(Violation("completion", f"history run {run} is not the accepted run {exp.run_ids[wf]}", (wf,)))
        events = obs.histories[(wf, run)]
        done = _completions(events)
        if len(done) != 1:
            last = _kind(events[-1]) if events else "nothing"
            out.append(Violation("completion", f"run {run} has {len(done)} completions (last event: {last})", (wf,)))
            continue
        got = _conv.from_bytes(_attrs(done[0])["result"])
        if got != exp.results[wf]:
            out.append(
                Violation("completion", f"run {run} completed with {got!r}, expected {exp.results[wf]!r}", (wf,))
            )
    for child in sorted(children):
        have = runs.get(child, [])
        closed = [r for r in have if len(_completions(obs.histories[(child, r)])) == 1]
        if len(have) != 1 or len(closed) != 1:
            out.append(
                Violation(
                    "completion", f"child has {len(have)} runs, {len(closed)} completed", (children[child], child)
                )
            )
    schedules = {SCHEDULE_ID_PREFIX + sid for sid in exp.schedules}
    for wf in sorted(set(runs) - set(exp.results) - set(children) - set(exp.crons) - schedules):
        out.append(Violation("completion", f"runs {sorted(runs[wf])} that no accepted start or parent explains", (wf,)))
    return out


# ---------------------------------------------------------------- 3. replay


def check_replay(obs: Observations, replayer: Replayer) -> list[Violation]:
    out = []
    for (wf, run), events in sorted(obs.histories.items()):
        if not events or not any(_kind(e) in _CLOSES for e in events):
            continue  # only closed runs: an open run's last task may still be in flight
        if is_activity_key(wf):
            continue  # a standalone activity's run has no workflow code to replay
        ordered = sorted(events, key=lambda e: e["seq"])
        if [e["seq"] for e in ordered] != list(range(1, len(ordered) + 1)):
            continue  # reported by the history invariant; replay needs a well-formed history
        try:
            replayer.replay(ordered)
        except NonDeterminismError as exc:
            out.append(Violation("replay", f"run {run} does not replay: {exc}", (wf,)))
        except Exception as exc:  # noqa: BLE001 - any replay error is a violation to report
            out.append(Violation("replay", f"run {run} replay raised {type(exc).__name__}: {exc}", (wf,)))
    return out


# ---------------------------------------------------------------- 4. activity


def _idempotency_key(wf: str, run: str, activity_id: str) -> str:
    return f"{wf}/{run}/{activity_id}"


def check_activities(obs: Observations) -> list[Violation]:
    out = []
    ledger = collections.Counter(obs.ledger)
    executed: dict[str, set[int]] = collections.defaultdict(set)
    for key, attempt in obs.attempts:
        executed[key].add(attempt)
    known: dict[str, str] = {}
    for (wf, run), events in sorted(obs.histories.items()):
        # a terminate (the driver's, of a cron chain) ends a run with its activity still running
        closed = any(_kind(e) in _CLOSES and _kind(e) != "WorkflowExecutionTerminated" for e in events)
        scheduled = {_attrs(e)["activity_id"]: e["seq"] for e in events if _kind(e) == "ActivityTaskScheduled"}
        for aid, seq in sorted(scheduled.items()):
            key = _idempotency_key(wf, run, aid)
            known[key] = wf
            mine = [
                e
                for e in events
                if _attrs(e).get("scheduled_seq") == seq
                and _kind(e) in (*_ACTIVITY_RESULTS, "ActivityTaskAttemptFailed")
            ]
            results = [e for e in mine if _kind(e) in _ACTIVITY_RESULTS]
            if not results:
                if closed:
                    out.append(Violation("activity", f"activity {aid} of closed run {run} has no result", (wf,)))
                continue
            result = results[0]
            if _kind(result) != "ActivityTaskCompleted":
                continue  # the chaos activities never fail; the completion invariant reports the run
            if ledger[key] != 1:
                out.append(
                    Violation(
                        "activity",
                        f"activity {aid} (key {key}) completed but its effect happened {ledger[key]} times",
                        (wf,),
                    )
                )
            final = _attrs(result)["attempt"]
            failed = sorted(_attrs(e)["attempt"] for e in mine if _kind(e) == "ActivityTaskAttemptFailed")
            if failed != list(range(1, final)):
                out.append(
                    Violation(
                        "activity",
                        f"activity {aid} completed by attempt {final} but history failed attempts {failed}",
                        (wf,),
                    )
                )
            ran = executed.get(key, set())
            if final not in ran:
                out.append(
                    Violation(
                        "activity",
                        f"activity {aid} completed by attempt {final}, which no worker ran (ran: {sorted(ran)})",
                        (wf,),
                    )
                )
            if ran - set(range(1, final + 1)):
                out.append(
                    Violation(
                        "activity",
                        f"workers ran attempts {sorted(ran)} of activity {aid}, history dispatched 1..{final}",
                        (wf,),
                    )
                )
    for key, n in sorted(ledger.items()):
        if key not in known:
            out.append(
                Violation(
                    "activity",
                    f"effect of {key} happened {n} time(s) for an activity history never scheduled",
                    (key.split("/")[0],),
                )
            )
    return out


# ---------------------------------------------------------------- 5. signal


def _carried_into(obs: Observations) -> dict[tuple[str, str], str]:
    """(workflow, run) -> the run it continued as new from (decision 0053: the signals that run's
    closing task never saw are recorded again at the next run's start, with their request IDs)."""
    out = {}
    for (wf, run), events in obs.histories.items():
        if events and _kind(events[-1]) == "WorkflowExecutionContinuedAsNew":
            out[(wf, _attrs(events[-1])["new_run_id"])] = run
    return out


def check_signals(exp: Expectations, obs: Observations) -> list[Violation]:
    out = []
    seen: dict[str, list[str]] = collections.defaultdict(list)
    runs_of: dict[str, set[tuple[str, str]]] = collections.defaultdict(set)
    for (wf, run), events in obs.histories.items():
        for e in events:
            if _kind(e) == "WorkflowSignaled":
                seen[e["request_id"] or ""].append(wf)
                runs_of[e["request_id"] or ""].add((wf, run))
    # a signal carried by a continue-as-new is one signal: its copy in the next run is dropped
    carried_from = _carried_into(obs)
    for rid, runs in runs_of.items():
        for wf, run in runs:
            if (wf, carried_from.get((wf, run))) in runs:
                seen[rid].remove(wf)
    for rid, wf in sorted(exp.signals.items()):
        where = seen.get(rid, [])
        if len(where) != 1:
            out.append(Violation("signal", f"accepted signal {rid} appears {len(where)} times in history", (wf,)))
        elif where[0] != wf:
            out.append(
                Violation("signal", f"accepted signal {rid} for {wf} is in the history of {where[0]}", (wf, where[0]))
            )
    for rid in sorted(set(seen) - set(exp.signals)):
        out.append(Violation("signal", f"signal {rid!r} in history that no accepted request sent", tuple(seen[rid])))
    return out


def check_updates(exp: Expectations, obs: Observations) -> list[Violation]:
    out = []
    accepted: dict[str, list[str]] = collections.defaultdict(list)
    completed: dict[str, list[str]] = collections.defaultdict(list)
    for (wf, _run), events in obs.histories.items():
        for e in events:
            if _kind(e) == "WorkflowUpdateAccepted":
                accepted[_attrs(e)["update_id"]].append(wf)
            elif _kind(e) == "WorkflowUpdateCompleted":
                completed[_attrs(e)["update_id"]].append(wf)
    for rid, wf in sorted(exp.updates.items()):
        if accepted.get(rid) != [wf] or completed.get(rid) != [wf]:
            out.append(
                Violation(
                    "update",
                    f"answered update {rid} is accepted in {accepted.get(rid, [])} and "
                    f"completed in {completed.get(rid, [])}, once each in {wf} expected",
                    (wf,),
                )
            )
    for rid, wf in sorted(exp.rejected_updates.items()):
        if rid in accepted or rid in completed:
            out.append(Violation("update", f"rejected update {rid} is in history", (wf,)))
    for rid in sorted(set(accepted) - set(exp.updates)):
        out.append(
            Violation("update", f"update {rid!r} in history that no answered request sent", tuple(accepted[rid]))
        )
    return out


# ---------------------------------------------------------------- 6. timer


def check_timers(obs: Observations, gaps: list | None = None) -> list[Violation]:
    """``kadence verify``'s timer checks (none ends twice, none fires early, none fires unstarted),
    and one of the suite's own: every timer of a completed run fired or was canceled (the chaos
    workflows cancel none and complete only after their timers)."""
    out = [
        Violation("timer", f"run {g.run_id}: {g.message}", (g.workflow_id,))
        for g in (_engine_gaps(obs) if gaps is None else gaps)
        if g.check == "timer"
    ]
    for (wf, run), events in sorted(obs.histories.items()):
        if not _completions(events):
            continue
        ended = {_attrs(e)["timer_id"] for e in events if _kind(e) in ("TimerFired", "TimerCanceled")}
        for e in events:
            if _kind(e) == "TimerStarted" and _attrs(e)["timer_id"] not in ended:
                out.append(Violation("timer", f"run {run}: timer {_attrs(e)['timer_id']} never fired (lost)", (wf,)))
    return out


# ---------------------------------------------------------------- 7. dead letters


def check_dead_letters(exp: Expectations, obs: Observations) -> list[Violation]:
    out = []
    dead = collections.defaultdict(list)
    for d in obs.dead_letters:
        dead[(d["key"], d["value"])].append(d)
    for key, value in exp.garbage:
        found = dead.get((key, value), [])
        wf = (key or b"").decode(errors="replace")
        if not found:
            out.append(
                Violation("dead_letter", f"undecodable record {value[:24]!r} is not in the dead-letter topic", (wf,))
            )
        elif not any("undecodable" in d["reason"] for d in found):
            out.append(
                Violation(
                    "dead_letter",
                    f"undecodable record {value[:24]!r} dead-lettered with reason {found[0]['reason']!r}",
                    (wf,),
                )
            )
    return out


# ---------------------------------------------------------------- 9. pause

#: what a paused run must not record (they need a dispatched task or a fired timer or deadline)
_HELD_WHILE_PAUSED = ("WorkflowTaskScheduled", "TimerFired", "ActivityTaskTimedOut")


def check_pauses(exp: Expectations, obs: Observations) -> list[Violation]:
    out = []
    seen: dict[str, int] = collections.Counter()
    for (wf, run), events in sorted(obs.histories.items()):
        paused = False
        for e in events:
            kind = _kind(e)
            if kind in ("WorkflowExecutionPaused", "WorkflowExecutionUnpaused"):
                rid = e["request_id"] or ""
                seen[rid] += 1
                if exp.pauses.get(rid) != wf:
                    out.append(
                        Violation(
                            "pause",
                            f"run {run}: {kind} (seq {e['seq']}) from request {rid!r} that "
                            "the driver did not send for it",
                            (wf,),
                        )
                    )
                if (kind == "WorkflowExecutionPaused") == paused:
                    out.append(
                        Violation(
                            "pause",
                            f"run {run}: {kind} (seq {e['seq']}) while {'paused' if paused else 'not paused'}",
                            (wf,),
                        )
                    )
                paused = kind == "WorkflowExecutionPaused"
            elif paused and kind in _HELD_WHILE_PAUSED:
                out.append(Violation("pause", f"run {run}: {kind} (seq {e['seq']}) recorded while paused", (wf,)))
    for rid, n in sorted(seen.items()):
        if n > 1:
            out.append(Violation("pause", f"pause request {rid!r} recorded {n} times", (exp.pauses.get(rid, "?"),)))
    return out


# ---------------------------------------------------------------- all


def check_crons(exp: Expectations, obs: Observations) -> list[Violation]:
    """Each cron workflow is one chain of runs from its accepted start, each run linked to the one
    before (``new_run_id`` on its close, ``continued_from_run_id`` on the next start), no run
    outside it; each run is due at a time of the schedule, later than the run before (no time
    twice), and its code first ran at or after that time; the chain was ended by the driver's
    terminate, and ran at least twice."""
    out = []
    runs = _runs_by_workflow(obs)
    for wf, first in sorted(exp.crons.items()):
        chain: list[tuple[str, list[dict]]] = []
        run: str | None = first
        while run and run not in {r for r, _ in chain}:
            events = obs.histories.get((wf, run))
            if not events:
                out.append(Violation("cron", f"run {run} of the chain has no history", (wf, run)))
                break
            chain.append((run, events))
            run = _attrs(events[-1]).get("new_run_id") if _kind(events[-1]) in _CLOSES else None
        outside = set(runs.get(wf, [])) - {r for r, _ in chain}
        if outside:
            out.append(Violation("cron", f"runs outside the chain: {sorted(outside)}", (wf,)))
        times = []
        for i, (run, events) in enumerate(chain):
            started = _attrs(events[0])
            due = started.get("first_task_at_ms")
            if due is None or due % exp.cron_period_ms:
                out.append(Violation("cron", f"run {run} is not due at a time of the schedule ({due})", (wf, run)))
                continue
            times.append(due)
            tasks = [e for e in events if _kind(e) == "WorkflowTaskScheduled"]
            if tasks and tasks[0]["timestamp_ms"] < due:
                ran = tasks[0]["timestamp_ms"]
                out.append(Violation("cron", f"run {run} ran at {ran}, before its time {due}", (wf, run)))
            if i and started.get("continued_from_run_id") != chain[i - 1][0]:
                out.append(Violation("cron", f"run {run} does not name the run before it", (wf, run)))
        if times != sorted(set(times)):
            out.append(Violation("cron", f"the chain's times repeat or go back: {times}", (wf,)))
        if chain and _kind(chain[-1][1][-1]) != "WorkflowExecutionTerminated":
            out.append(Violation("cron", f"the chain's last run ends with {_kind(chain[-1][1][-1])}", (wf,)))
        if len(chain) < 2:
            out.append(Violation("cron", f"the chain made {len(chain)} run(s)", (wf,)))
    return out


def check_schedules(exp: Expectations, obs: Observations) -> list[Violation]:
    """Each schedule's history (all its runs, through continue-as-new) starts every time of its
    interval from its first to its last exactly once (``allow_all`` and a year's catch-up window:
    no time may be skipped or missed, whatever was killed), each under the ID of its time, and
    each of those IDs has exactly one run (the completion invariant checks that it completed)."""
    out = []
    runs = _runs_by_workflow(obs)
    for sid in exp.schedules:
        wf = SCHEDULE_ID_PREFIX + sid
        started = [
            _attrs(e)["workflow_id"]
            for run in runs.get(wf, [])
            for e in obs.histories[(wf, run)]
            if _kind(e) == "StartChildWorkflowExecutionInitiated"
        ]
        if len(started) < 3:
            out.append(Violation("schedule", f"the schedule started {len(started)} run(s)", (wf,)))
            continue
        twice = sorted(i for i, n in collections.Counter(started).items() if n > 1)
        if twice:
            out.append(Violation("schedule", f"times started twice: {twice[:5]}", (wf,)))
        times = sorted(_schedule_time(sid, i) for i in set(started))
        want = list(range(times[0], times[-1] + 1, exp.schedule_every_ms))
        if times != want:
            lost = sorted(set(want) - set(times))
            out.append(Violation("schedule", f"{len(lost)} time(s) never started, first {lost[:3]}", (wf,)))
        for child in sorted(set(started)):
            if len(runs.get(child, [])) != 1:
                out.append(Violation("schedule", f"{child} has {len(runs.get(child, []))} runs", (wf, child)))
    return out


def _schedule_time(schedule_id: str, workflow_id: str) -> int:
    """The nominal time in a scheduled run's ID (``{id}-2026-12-07T14:03:00Z``), epoch ms."""
    stamp = workflow_id[len(schedule_id) + 1 :].rstrip("Z")
    return int(datetime.fromisoformat(stamp).replace(tzinfo=UTC).timestamp() * 1000)


def check_concurrency(exp: Expectations, obs: Observations) -> list[Violation]:
    """No limit key over its max, no code or completion before its slots, no slot taken twice
    (``concurrency_check``)."""
    return [
        Violation("concurrency", message, ids)
        for ids, message in slot_violations(obs.histories, limited_runs=exp.limited_runs)
    ]


def check_streams(obs: Observations, charge_values=None) -> list[Violation]:
    """Every stream record was accepted once, by the event it names: a workflow's value by its
    ``StreamRecordPublished`` (each of which has exactly one), an activity's by the
    ``ActivityTaskCompleted`` of the same activity and attempt (whose values are exactly that
    attempt's: ``charge_values(amount, attempt)`` for the chaos ``charge``), an end by the run's
    close, once, after every other record of the workflow; no record of a run nobody ran."""
    out: list[Violation] = []
    by_run: dict[tuple[str, str], list[StreamEntry]] = collections.defaultdict(list)
    for entry in obs.streams:
        by_run[(entry.workflow_id, entry.run_id)].append(entry)
    for (wf, run), entries in sorted(by_run.items()):
        events = obs.histories.get((wf, run))
        if events is None:
            out.append(Violation("stream", f"{len(entries)} stream records of run {run}, which has no history", (wf,)))
            continue
        by_seq = {e["seq"]: e for e in events}
        values = collections.defaultdict(list)
        for entry in entries:
            ev = by_seq.get(entry.history_seq)
            kind = _kind(ev) if ev else None
            if entry.end:
                ok = kind in _CLOSES
            elif entry.activity_id is None:
                ok = kind == "StreamRecordPublished" and _attrs(ev)["stream"] == entry.stream
            else:
                a = _attrs(ev) if ev else {}
                ok = kind == "ActivityTaskCompleted" and (a["activity_id"], a["attempt"]) == (
                    entry.activity_id,
                    entry.attempt,
                )
            if not ok:
                out.append(
                    Violation(
                        "stream",
                        f"a stream record at offset {entry.offset} names event {entry.history_seq} ({kind}) of run "
                        f"{run}, which did not accept it (activity {entry.activity_id}, attempt {entry.attempt})",
                        (wf,),
                    )
                )
            values[entry.history_seq].append(entry)
        for ev in events:
            got = values.get(ev["seq"], [])
            if _kind(ev) == "StreamRecordPublished" and len(got) != 1:
                out.append(Violation("stream", f"event {ev['seq']} of run {run} published {len(got)} records", (wf,)))
        ends = [e for e in entries if e.end]
        if len(ends) > 1 or (ends and ends[0] is not entries[-1]):
            out.append(Violation("stream", f"run {run}: {len(ends)} end records, the last not last", (wf,)))
        if charge_values is not None:
            out += _charge_streams(wf, run, events, values, charge_values)
    for (wf, run), events in obs.histories.items():
        closed = events and _kind(events[-1]) in ("WorkflowExecutionCompleted", "WorkflowExecutionFailed")
        published = any(_kind(e) == "StreamRecordPublished" for e in events)
        if closed and published and not any(e.end for e in by_run.get((wf, run), ())):
            out.append(Violation("stream", f"run {run} published and closed without an end record", (wf,)))
    return out


def _charge_streams(wf: str, run: str, events: list[dict], values: dict, charge_values) -> list[Violation]:
    """The chaos ``charge``'s accepted attempt published exactly its own values."""
    out = []
    scheduled = {_attrs(e)["activity_id"]: _attrs(e) for e in events if _kind(e) == "ActivityTaskScheduled"}
    for ev in events:
        if _kind(ev) != "ActivityTaskCompleted":
            continue
        a = _attrs(ev)
        s = scheduled.get(a["activity_id"])
        if s is None or s["activity_type"] != "charge":
            continue
        amount = _conv.from_bytes(s["input"])[0]
        got = [_conv.from_bytes(e.value) for e in values.get(ev["seq"], [])]
        if got != charge_values(amount, a["attempt"]):
            out.append(Violation("stream", f"run {run}: charge attempt {a['attempt']} left {got} on the stream", (wf,)))
    return out


def check(exp: Expectations, obs: Observations, replayer: Replayer) -> list[Violation]:
    """Every violation, in the order of ``INVARIANTS``."""
    gaps = _engine_gaps(obs)  # the history and timer checks share one pass over the histories
    return [
        *check_history(obs, gaps),
        *check_completion(exp, obs),
        *check_replay(obs, replayer),
        *check_activities(obs),
        *check_signals(exp, obs),
        *check_updates(exp, obs),
        *check_timers(obs, gaps),
        *check_dead_letters(exp, obs),
        *check_pauses(exp, obs),
        *check_crons(exp, obs),
        *check_schedules(exp, obs),
        *check_concurrency(exp, obs),
        *check_streams(obs, charge_values),
    ]


def summarize(violations: Iterable[Violation]) -> str:
    counts = collections.Counter(v.invariant for v in violations)
    return ", ".join(f"{inv}: {counts[inv]}" for inv in INVARIANTS if counts[inv]) or "none"


def assert_clean(violations: list[Violation]) -> None:
    """Fail with the first violated invariant (and how many violations of each kind)."""
    if violations:
        first = violations[0]
        others = "\n".join(f"  {v}" for v in violations[1:20])
        raise AssertionError(
            f"invariant {first.invariant!r} violated: {first.message}; workflows: "
            f"{', '.join(first.workflow_ids)}\nviolations by invariant: {summarize(violations)}"
            + (f"\nmore:\n{others}" if others else "")
        )


_BRIEF = ("activity_id", "scheduled_seq", "attempt", "timer_id", "fire_at_ms", "signal_name", "identity", "workflow_id")


def format_history(events: list[dict]) -> str:
    """One line per event (seq, time, type, the attributes that identify it), for failure reports."""
    lines = []
    for e in events:
        brief = {k: v for k, v in _attrs(e).items() if k in _BRIEF and v not in (None, "")}
        rid = f" request_id={e['request_id']}" if e.get("request_id") else ""
        lines.append(f"    {e['seq']:>3} {e['timestamp_ms']} {_kind(e)} {brief}{rid}")
    return "\n".join(lines)


def explain(violations: list[Violation], obs: Observations, limit: int = 3) -> str:
    """The histories of the first ``limit`` workflows a violation names."""
    wanted: list[str] = []
    for v in violations:
        for wf in v.workflow_ids:
            if wf not in wanted:
                wanted.append(wf)
    out = []
    for wf in wanted[:limit]:
        for (w, run), events in sorted(obs.histories.items()):
            if w == wf:
                out.append(f"  history of {wf} run {run}:\n{format_history(events)}")
    return "\n".join(out)
