"""What a batch's transaction writes besides its offsets: each shard's history events, states,
tasks, replies, commands and timers, and the batch's dead letters (``OutputWriter``).

The history processor hands it the batch's views and outboxes; it encodes each record with its
topic's codec (the public topics' in a schema registry's format when one is configured, decision
0056), creates a task queue's or build's topics on their first task, and produces through the
processor's transactional producer (``produce``).
"""

from __future__ import annotations

import logging
import zlib
from typing import Any, Protocol

from prometheus_client import Counter

from kadence.topics import serde
from kadence.topics.catalogue import Catalogue
from kadence.topics.priority import fairness_headers, level_of
from kadence.topics.records import command, history_key, now_ms
from kadence.topics.streams import stream_partition

from .effects import BatchView, Outbox, count_history_bytes
from .timer_config import choose_tier

__all__ = ["OutputWriter", "reply_partition"]

log = logging.getLogger(__name__)


class Produce(Protocol):
    """``produce(topic, value, key, partition[, headers])``"""

    def __call__(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None,
        headers: list[tuple[str, bytes]] | None = None,
        /,
    ) -> None: ...


def reply_partition(instance_id: str, partitions: int) -> int:
    """The one ``{ns}.replies`` partition an instance writes its replies to (decision 0029).

    Every client reads all of that topic's partitions (a reply is found by its key, the request
    ID), so where a reply lands changes nothing for its reader; one partition per instance
    instead of one per request ID saves each transaction a Produce request, and the broker's
    partition check and commit marker, for every other replies partition it would have touched.
    Instances spread over the partitions by the hash of their stable ID."""
    return zlib.crc32(instance_id.encode()) % partitions


class OutputWriter:
    """Encodes and produces a batch's outputs (``write``)."""

    def __init__(self, topics: Catalogue, produce: Produce, *, task_max_bytes: int, oversized_tasks: Counter) -> None:
        self.topics = topics
        self._produce = produce
        self._task_max_bytes = task_max_bytes
        #: workflow tasks sent without their events (too large: the worker reads the history topic)
        self._oversized_tasks = oversized_tasks
        # looked up now: a schema registry that lacks the subjects stops the processor's start
        self.cmd_codec, self.event_codec, self.reply_codec = serde.public_codecs(topics)
        self._state_codec = serde.codec("WorkflowState")
        self._wt_codec, self._at_codec = serde.codec("WorkflowTask"), serde.codec("ActivityTask")
        self._timer_codec = serde.codec("TimerRecord")
        #: made when a batch first writes a concurrency limit (``processors.concurrency``)
        self._limit_codec: serde.Codec | None = None
        self._known_queues: set[str] = set()
        self._known_builds: set[tuple[str, str]] = set()
        #: where this instance's replies go (``reply_partition``; set when the topics are checked)
        self.reply_partition = 0
        #: made when a batch first writes a stream record: a processor of a release that knows no
        #: streams yet (a rolling upgrade's previous release, emulated by its schemas) starts all the same
        self._stream_codec: serde.Codec | None = None
        #: the partitions of ``{ns}.streams`` (set when the topics are checked)
        self.stream_partitions = 1

    def write(self, views: dict[int, BatchView], outboxes: dict[int, Outbox], dead: list[Any]) -> None:
        for p, out in outboxes.items():
            view = views[p]
            self._events_and_states(p, view, out)
            for kind, queue, task in out.tasks:
                self._task(kind, queue, task, view)
            for answer in out.replies:
                answer["history_seq"] = view.seq_reached(answer["workflow_id"], answer["run_id"])
                raw = self.reply_codec.encode(answer)
                self._produce(self.topics.replies, raw, answer["request_id"].encode(), self.reply_partition)
            for wf, body_type, body, run_id, request_id, ref in out.commands:
                cmd = command(
                    wf,
                    body_type,
                    body,
                    run_id=run_id,
                    request_id=request_id,
                    trace_id=ref and ref[0],
                    span_id=ref and ref[1],
                )
                self._produce(self.topics.commands, self.cmd_codec.encode(cmd), wf.encode(), None)
            if out.streams and self._stream_codec is None:
                self._stream_codec = serde.codec("StreamRecord")
            for rec in out.streams:
                assert self._stream_codec is not None
                wf = rec["workflow_id"]
                partition = stream_partition(wf, self.stream_partitions)
                self._produce(self.topics.streams, self._stream_codec.encode(rec), wf.encode(), partition)
            now = now_ms()
            for timer in out.timers:
                topic = self.topics.timers(choose_tier(timer["fire_at_ms"] - now))
                self._produce(topic, self._timer_codec.encode(timer), timer["workflow_id"].encode(), None)
        for msg, reason, exc in dead:
            self._dead_letter(msg, reason, exc)

    def _events_and_states(self, p: int, view: BatchView, out: Outbox) -> None:
        for wf, ev in out.events:
            raw = self.event_codec.encode(ev)
            view.raw_events[ev["event_id"]] = raw
            count_history_bytes(view.states.get(wf), ev, len(raw))
            self._produce(self.topics.history, raw, history_key(wf, ev["run_id"], ev["seq"]).encode(), p)
        for wf, st in view.states.items():
            raw = self._state_codec.encode(st)
            view.raw_states[wf] = raw
            self._produce(self.topics.state, raw, wf.encode(), p)
        for wf in view.tombstones():  # archival purge: the state record is deleted
            self._produce(self.topics.state, None, wf.encode(), p)
        if view.limits and self._limit_codec is None:
            self._limit_codec = serde.codec("ConcurrencyState")
        for key, cs in view.limits.items():  # concurrency limits this shard owns
            assert self._limit_codec is not None
            self._produce(self.topics.concurrency, self._limit_codec.encode(cs), key.encode(), p)

    def _task(self, kind: str, queue: str, task: Any, view: BatchView) -> None:
        self._ensure_queue(queue)
        if kind == "workflow":
            build = task["build_id"]
            if build is not None:
                self._ensure_build(queue, build)
            # the lane of the run's priority (its state is in the batch: it scheduled the task)
            st = view.states.get(task["workflow_id"])
            topic = self.topics.workflow_lane(queue, level_of(st.get("priority") if st else None), build)
            raw = self._wt_codec.encode(task)
            if len(raw) > self._task_max_bytes:
                # too large for one record (the transaction would fail, again and again): the
                # worker reads the events from the history topic, committed with it
                raw = self._wt_codec.encode({**task, "events": [], "history_in_topic": True})
                self._oversized_tasks.inc()
            self._produce(topic, raw, task["workflow_id"].encode(), None)
        elif kind == "activity":  # an "eager" one rides in its reply (``activities.send_eager``)
            raw = self._at_codec.encode(task)
            # its priority's lane, its fairness key in a header (``topics.priority``)
            priority = task.get("priority")
            topic = self.topics.activity_lane(queue, level_of(priority))
            self._produce(topic, raw, task["workflow_id"].encode(), None, fairness_headers(priority))

    def _dead_letter(self, msg: Any, reason: str, exc: BaseException) -> None:
        record = {
            "origin_topic": msg.topic(),
            "origin_partition": msg.partition(),
            "origin_offset": msg.offset(),
            "key": msg.key(),
            "value": msg.value(),
            "reason": f"{reason}: {exc}"[:2000],
            "error_type": type(exc).__name__,
            "component": "history-processor",
            "timestamp_ms": now_ms(),
        }
        self._produce(self.topics.dlq, serde.encode("DeadLetter", record), msg.key(), None)
        log.warning("dead-lettered %s[%d]@%d: %s", msg.topic(), msg.partition(), msg.offset(), reason)

    def _ensure_queue(self, queue: str) -> None:
        if queue not in self._known_queues:
            self.topics.ensure_queue(queue)
            self._known_queues.add(queue)

    def _ensure_build(self, queue: str, build: str) -> None:
        """The workflow-task topics of a build, created on first use (like a queue's topics)."""
        if (queue, build) not in self._known_builds:
            self.topics.ensure_build(queue, build)
            self._known_builds.add((queue, build))
