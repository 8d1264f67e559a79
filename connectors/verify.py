"""Reconciliation: the invariant gaps of a namespace, read from its topics (``kadence verify``).

The engine promises that a history never records a transition twice and that each accepted
operation has one stable result. This module checks that promise over what is in Kafka, for an
operator after an incident and for the chaos suite after every run (one implementation):

- ``history``: a run's events are seqs 1..n in topic order (no duplicate, no gap, none out of
  order), and nothing follows the event that closed it;
- ``activity``: an activity has at most one result (completed, failed, timed out or canceled),
  and no attempt fails twice;
- ``timer``: a timer ends (fires or is canceled) at most once, and never fires before its
  ``fire_at_ms``;
- ``state``: the latest state record of a workflow agrees with its run's history: every event
  the state counts (``next_seq - 1``) is in the history, a closed state has a closing event, and
  the bytes it counts (``history_bytes``) are those of its history's records;
- ``reply``: a request the engine accepted (answered ``ok``) is never answered differently later.

The history is streamed: per run the checker keeps a few numbers and the seqs of its activity
results and the IDs of its timers, not the events. ``since_ms`` checks only the tail (events from then on; the first event
seen of a run may then be any seq, and the state check, which needs whole histories, is skipped).

Reading order makes the state check safe on a live namespace: the state topic is read first, the
history after it, and every state record was committed in one transaction with the events it
counts, so those events are in the history that is read later.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import Message
from prometheus_client import CollectorRegistry, Gauge

from kadence.topics import Catalogue, KafkaConfig, SchemaError, serde
from kadence.topics.records import CLOSE_EVENTS
from kadence.topics.scan import scan

__all__ = ["CHECKS", "Gap", "HistoryChecker", "ReplyChecker", "Report", "check_state", "verify_namespace"]

CHECKS = ("history", "activity", "timer", "state", "reply")
_ACTIVITY_RESULTS = ("ActivityTaskCompleted", "ActivityTaskFailed", "ActivityTaskTimedOut", "ActivityTaskCanceled")
#: gaps reported per check, at most (the counts go on)
MAX_REPORTED = 1000


@dataclass(frozen=True)
class Gap:
    check: str
    message: str
    workflow_id: str
    run_id: str | None = None

    def __str__(self) -> str:
        run = f" run {self.run_id}" if self.run_id else ""
        return f"[{self.check}] workflow {self.workflow_id!r}{run}: {self.message}"


class _Run:
    __slots__ = (
        "bytes",
        "closed_seq",
        "ended_timers",
        "failed_attempts",
        "last_seq",
        "results",
        "seqs_broken",
        "timers",
    )

    def __init__(self) -> None:
        self.last_seq = 0
        self.closed_seq: int | None = None
        self.results: set[int] = set()
        self.failed_attempts: set[tuple[int, int]] = set()
        self.timers: dict[str, int] = {}
        self.ended_timers: set[str] = set()
        self.bytes = 0  # of its records as read, for the state's history_bytes
        self.seqs_broken = False  # a seq recorded twice or missing: its bytes are not compared


class HistoryChecker:
    """Feed it every ``HistoryEvent`` in topic order (``add``); ``gaps`` collects what it finds.
    ``last_seqs()``: (workflow_id, run_id) -> the highest seq seen, for the state check."""

    def __init__(self, *, tail: bool = False) -> None:
        self.tail = tail
        self.events = 0
        self._gaps: list[Gap] = []
        self._runs: dict[tuple[str, str], _Run] = {}
        #: runs with a tombstone in the topic: archived and being deleted (compaction may already
        #: have removed some of their events, so they are not checked)
        self._deleted: set[tuple[str, str]] = set()

    @property
    def deleted(self) -> set[tuple[str, str]]:
        return set(self._deleted)

    @property
    def gaps(self) -> list[Gap]:
        return [g for g in self._gaps if (g.workflow_id, g.run_id) not in self._deleted]

    def _gap(self, check: str, wf: str, run: str, message: str) -> None:
        self._gaps.append(Gap(check, message, wf, run))

    def add_tombstone(self, key: bytes) -> None:
        """A history record deleted (``{workflow_id}/{run_id}/{seq}`` with no value)."""
        parts = key.decode(errors="replace").rsplit("/", 2)
        if len(parts) == 3:
            self._deleted.add((parts[0], parts[1]))

    def add(self, e: dict[str, Any], size: int = 0) -> None:
        """``size``: the record's length in bytes (the state's ``history_bytes`` is checked against
        the sum; 0 when the caller has no record)."""
        self.events += 1
        wf, run_id, seq = e["aggregate_key"], e["run_id"], e["seq"]
        kind, a = e["attributes"]
        run = self._runs.get((wf, run_id))
        if run is None:
            run = self._runs[(wf, run_id)] = _Run()
            if seq != 1 and not self.tail:
                self._gap("history", wf, run_id, f"the history starts at seq {seq}: seqs 1..{seq - 1} are missing")
                run.seqs_broken = True
        elif seq <= run.last_seq:
            self._gap("history", wf, run_id, f"seq {seq} ({kind}) recorded again after seq {run.last_seq}")
            run.seqs_broken = True
        elif seq > run.last_seq + 1:
            self._gap("history", wf, run_id, f"seqs {run.last_seq + 1}..{seq - 1} are missing before seq {seq}")
            run.seqs_broken = True
        if run.closed_seq is not None and seq > run.closed_seq:
            self._gap("history", wf, run_id, f"seq {seq} ({kind}) follows the close at seq {run.closed_seq}")
        run.last_seq = max(run.last_seq, seq)
        run.bytes += size
        if kind in CLOSE_EVENTS:
            if run.closed_seq is None:
                run.closed_seq = seq
        elif kind in _ACTIVITY_RESULTS:
            if a["scheduled_seq"] in run.results:
                self._gap(
                    "activity",
                    wf,
                    run_id,
                    f"the activity scheduled at seq {a['scheduled_seq']} has a second result: {kind} at seq {seq}",
                )
            run.results.add(a["scheduled_seq"])
        elif kind == "ActivityTaskAttemptFailed":
            attempt = (a["scheduled_seq"], a["attempt"])
            if attempt in run.failed_attempts:
                self._gap(
                    "activity",
                    wf,
                    run_id,
                    f"attempt {a['attempt']} of the activity scheduled at seq "
                    f"{a['scheduled_seq']} failed twice (again at seq {seq})",
                )
            run.failed_attempts.add(attempt)
        elif kind == "TimerStarted":
            run.timers[a["timer_id"]] = a["fire_at_ms"]
        elif kind in ("TimerFired", "TimerCanceled"):
            tid = a["timer_id"]
            if kind == "TimerCanceled" and not a.get("started_seq") and tid in run.ended_timers:
                # a no-op cancel (started_seq 0): the timer fired while the workflow task that
                # canceled it was in flight; the engine records the command and changes nothing
                return
            if tid in run.ended_timers:
                self._gap("timer", wf, run_id, f"timer {tid!r} ended twice (again at seq {seq}, {kind})")
            run.ended_timers.add(tid)
            fire_at = run.timers.get(tid)
            if fire_at is None and not self.tail:
                self._gap("timer", wf, run_id, f"timer {tid!r} ended at seq {seq} ({kind}) but was never started")
            if kind == "TimerFired" and fire_at is not None and e["timestamp_ms"] < fire_at:
                self._gap(
                    "timer", wf, run_id, f"timer {tid!r} fired {fire_at - e['timestamp_ms']} ms early (seq {seq})"
                )

    def last_seqs(self) -> dict[tuple[str, str], tuple[int, bool]]:
        """(workflow_id, run_id) -> (highest seq seen, whether a closing event was seen)."""
        return {
            key: (run.last_seq, run.closed_seq is not None)
            for key, run in self._runs.items()
            if key not in self._deleted
        }

    def sizes(self) -> dict[tuple[str, str], int]:
        """(workflow_id, run_id) -> bytes of its records (as given to ``add``); a run whose seqs
        are already a gap (one recorded twice, some missing) is left out, so one fault is not
        reported twice."""
        return {key: run.bytes for key, run in self._runs.items() if key not in self._deleted and not run.seqs_broken}


def check_state(
    states: dict[str, dict[str, Any]],
    last_seqs: dict[tuple[str, str], tuple[int, bool]],
    deleted: set[tuple[str, str]] | None = None,
    sizes: dict[tuple[str, str], int] | None = None,
) -> list[Gap]:
    """The latest state record per workflow against its run's history (``HistoryChecker.last_seqs``);
    runs in ``deleted`` (archived, their history being deleted) are not checked. With ``sizes``
    (``HistoryChecker.sizes``), a state whose ``history_bytes`` differs from the bytes of its
    history is a gap, when the history ends where the state does (a run still being written is
    not compared) and the state counts bytes (runs started before schema version 11 do not)."""
    gaps = []
    for wf, st in states.items():
        counted = st["next_seq"] - 1
        if deleted and (wf, st["run_id"]) in deleted:
            continue
        have, closed = last_seqs.get((wf, st["run_id"]), (0, False))
        if have < counted:
            gaps.append(
                Gap("state", f"the state counts {counted} events but the history ends at seq {have}", wf, st["run_id"])
            )
        if st["status"] != "running" and counted > 0 and not closed and have >= counted:
            gaps.append(
                Gap("state", f"the state says {st['status']} but the history has no closing event", wf, st["run_id"])
            )
        counted_bytes = st.get("history_bytes")
        if sizes is not None and counted_bytes is not None and have == counted and (wf, st["run_id"]) in sizes:
            held = sizes[(wf, st["run_id"])]
            if held != counted_bytes:
                gaps.append(
                    Gap(
                        "state",
                        f"the state counts {counted_bytes} history bytes but the history holds {held}",
                        wf,
                        st["run_id"],
                    )
                )
    return gaps


class ReplyChecker:
    """Feed it every ``Reply`` in topic order; a request answered ``ok`` (accepted) and later
    answered otherwise is a gap. Answers to reads (results, queries, ``running``) are not compared:
    a read may see a newer state when asked again."""

    def __init__(self) -> None:
        self.gaps: list[Gap] = []
        self.replies = 0
        self._accepted: dict[tuple[str, str], tuple[Any, ...]] = {}

    def add(self, r: dict[str, Any]) -> None:
        self.replies += 1
        if not r["request_id"] or r["result"] is not None or r["failure"] is not None:
            return
        key = (r["workflow_id"], r["request_id"])
        answer = (r["status"], r["run_id"])
        first = self._accepted.get(key)
        if first is None:
            if r["status"] == "ok":
                self._accepted[key] = answer
        elif answer != first:
            self.gaps.append(
                Gap(
                    "reply",
                    f"request {r['request_id']!r} was accepted ({first[0]}, run {first[1]}) "
                    f"and later answered {answer[0]} (run {answer[1]})",
                    r["workflow_id"],
                    r["run_id"],
                )
            )


@dataclass
class Report:
    namespace: str
    since_ms: int | None
    events: int = 0
    states: int = 0
    replies: int = 0
    runs: int = 0
    gaps: list[Gap] = field(default_factory=list)
    #: gaps per check (all of them, also those beyond MAX_REPORTED)
    counts: dict[str, int] = field(default_factory=lambda: {c: 0 for c in CHECKS})
    skipped: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    def add(self, gaps: Iterable[Gap]) -> None:
        for gap in gaps:
            self.counts[gap.check] += 1
            if self.counts[gap.check] <= MAX_REPORTED:
                self.gaps.append(gap)

    def to_json(self) -> str:
        out = asdict(self)
        out["ok"] = self.ok
        return json.dumps(out, indent=2)

    def to_metrics(self, finished_s: float) -> CollectorRegistry:
        """The report as Prometheus metrics (``kadence verify --metrics-file``, for node_exporter's
        textfile collector): gaps per check, records checked, and when the check finished."""
        r = CollectorRegistry()
        gaps = Gauge(
            "kadence_verify_gaps",
            "invariant gaps the last kadence verify found, by check",
            ["namespace", "check"],
            registry=r,
        )
        for check, n in self.counts.items():
            gaps.labels(self.namespace, check).set(n)
        records = Gauge(
            "kadence_verify_records", "records the last kadence verify read, by kind", ["namespace", "kind"], registry=r
        )
        for kind, n in (
            ("events", self.events),
            ("states", self.states),
            ("replies", self.replies),
            ("runs", self.runs),
        ):
            records.labels(self.namespace, kind).set(n)
        Gauge(
            "kadence_verify_last_run_timestamp_seconds",
            "when the last kadence verify finished (Unix time)",
            ["namespace"],
            registry=r,
        ).labels(self.namespace).set(finished_s)
        return r


def _where(msg: Message) -> str:
    return f"{msg.topic()}[{msg.partition()}]@{msg.offset()}"


def _records(
    config: KafkaConfig,
    topic: str,
    since_ms: int | None,
    record: str,
    check: str,
    undecodable: list[Gap],
    progress: Callable[[str, int, int | None], None] | None,
) -> Iterator[tuple[Message, Any]]:
    """(message, decoded value or None for a tombstone) of ``topic``; an undecodable record is
    added to ``undecodable`` as a gap of ``check``; ``progress`` every 1,000 records."""
    codec, done, total = serde.codec(record), 0, None

    def on_total(n: int) -> None:
        nonlocal total
        total = n
        if progress is not None:
            progress(topic, 0, n)

    for msg in scan(config, topic, since_ms=since_ms, on_total=on_total):
        done += 1
        if progress is not None and done % 1000 == 0:
            progress(topic, done, total)
        value = msg.value()
        try:
            decoded = codec.decode(value) if value is not None else None
        except SchemaError as exc:
            key = msg.key().decode(errors="replace") if msg.key() else "?"
            undecodable.append(Gap(check, f"undecodable {record} record at {_where(msg)}: {exc}", key))
            continue
        yield msg, decoded


def verify_namespace(
    config: KafkaConfig, *, since_ms: int | None = None, progress: Callable[[str, int, int | None], None] | None = None
) -> Report:
    """Check a namespace's state, history and replies topics; ``progress(topic, done, total)``
    is called as records are read (``total`` is the sum of the partitions' end - start offsets,
    an upper bound: transaction markers take offsets too)."""
    topics = Catalogue(config)
    report = Report(config.namespace, since_ms)

    states: dict[str, dict[str, Any]] = {}
    undecodable: list[Gap] = []

    def records(topic: str, since: int | None, record: str, check: str) -> Iterator[tuple[Message, Any]]:
        return _records(config, topic, since, record, check, undecodable, progress)

    if since_ms is None:
        for msg, st in records(topics.state, None, "WorkflowState", "state"):
            key = msg.key()
            if key is None:  # not a run's state (every state record is keyed by its workflow)
                continue
            if st is None:
                states.pop(key.decode(), None)
            else:
                states[key.decode()] = {
                    "run_id": st["run_id"],
                    "next_seq": st["next_seq"],
                    "status": st["status"],
                    "history_bytes": st.get("history_bytes"),
                }
        report.states = len(states)
    else:
        report.skipped.append("state (it needs whole histories: run without --since)")
    history = HistoryChecker(tail=since_ms is not None)
    for msg, event in records(topics.history, since_ms, "HistoryEvent", "history"):
        key = msg.key()
        if event is not None:
            history.add(event, len(msg.value() or b""))
        elif key:
            history.add_tombstone(key)
    report.events = history.events
    last = history.last_seqs()
    report.runs = len(last)
    report.add(history.gaps)
    if since_ms is None:
        report.add(check_state(states, last, history.deleted, history.sizes()))
    replies = ReplyChecker()
    for _msg, reply in records(topics.replies, since_ms, "Reply", "reply"):
        if reply is not None:
            replies.add(reply)
    report.replies = replies.replies
    report.add(replies.gaps)
    report.add(undecodable)
    return report
