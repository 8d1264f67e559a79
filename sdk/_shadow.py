"""Shadow replay: live histories from the history topic replayed against a candidate build's
workflow code, before that build is promoted (the design brief's safe-deploy step; docs/upgrading.md).

    shadow = ShadowReplay(config, Replayer(workflows=[OrderFulfilment]), per_type=1000)
    results = shadow.sample()             # the latest 1,000 runs of each type, open ones included
    shadow.follow(report, stop)           # then every run again whenever its history grows

One reader without a consumer group reads ``{ns}.history`` (committed events only) from its
start. Per workflow type it holds the histories of the latest ``per_type`` runs (by when they
started; an older one is dropped when a newer one starts), so memory is bounded by the sample,
not by the topic. ``sample()`` reads to the end offsets it found when it began and replays every
run it holds; ``follow()`` goes on reading and replays each run whose history grew since its last
replay, at most every ``interval_s``. A run is reported as failed once, at its first divergence.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from kadence.topics import serde
from kadence.topics.catalogue import Catalogue
from kadence.topics.config import KafkaConfig
from kadence.topics.errors import BrokerUnavailableError

from ._replayer import Replayer, ReplayResult

__all__ = ["ShadowReplay"]

log = logging.getLogger(__name__)

RunKey = tuple[str, str]


class ShadowReplay:
    def __init__(self, config: KafkaConfig, replayer: Replayer, *, per_type: int = 1000, timeout: float = 30.0) -> None:
        if per_type < 1:
            raise ValueError("per_type must be at least 1")
        self.config, self.replayer, self.per_type, self.timeout = config, replayer, per_type, timeout
        self.topic = Catalogue(config).history
        #: run -> seq -> event, for the runs held
        self._runs: dict[RunKey, dict[int, dict[str, Any]]] = {}
        #: workflow type -> the runs held, oldest start first
        self._by_type: dict[str, collections.OrderedDict[RunKey, None]] = collections.defaultdict(
            collections.OrderedDict
        )
        #: runs whose history grew since their last replay
        self._dirty: set[RunKey] = set()
        #: runs reported as failed (not reported again)
        self.failed: dict[RunKey, ReplayResult] = {}
        #: workflow type -> [replays that passed, runs failed]
        self.per_type_counts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
        self._consumer: Consumer | None = None

    # -- reading -------------------------------------------------------------------------------

    def _open(self) -> tuple[Consumer, dict[int, int]]:
        consumer = Consumer(self.config.consumer(None))
        try:
            md = consumer.list_topics(self.topic, timeout=self.timeout).topics[self.topic]
            parts = sorted(md.partitions)
            marks = {
                p: consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=self.timeout) for p in parts
            }
            # what is left to read: partitions with records, to their end now
            ends = {p: high for p, (low, high) in marks.items() if high > low}
        except (KafkaException, KeyError) as exc:
            consumer.close()
            raise BrokerUnavailableError(f"cannot read {self.topic}: {exc}") from exc
        consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in parts])
        return consumer, ends

    def _take(self, msg: Any) -> None:
        key = msg.key()
        if key is None:
            return
        wf, run_id, seq = key.decode().rsplit("/", 2)
        run = (wf, run_id)
        if not msg.value():  # a tombstone (archival): the event is gone
            if run in self._runs:
                self._runs[run].pop(int(seq), None)
            return
        event = serde.decode("HistoryEvent", msg.value())
        kind, attrs = event["attributes"]
        if kind == "WorkflowExecutionStarted":
            held = self._by_type[attrs["workflow_type"]]
            held[run] = None
            self._runs.setdefault(run, {})
            while len(held) > self.per_type:  # a newer run of the type: the oldest one goes
                old, _ = held.popitem(last=False)
                self._runs.pop(old, None)
                self._dirty.discard(old)
        if run not in self._runs:  # a run not held (dropped, or its start was never read)
            return
        self._runs[run][int(seq)] = event
        self._dirty.add(run)

    def _poll(self, consumer: Consumer, timeout: float) -> int:
        taken = 0
        for msg in consumer.consume(1000, timeout):
            err = msg.error()
            if err is not None:
                if err.fatal():
                    raise BrokerUnavailableError(f"reading {self.topic}: {err}")
                continue
            self._take(msg)
            taken += 1
        return taken

    # -- replaying -----------------------------------------------------------------------------

    def _replay_dirty(self) -> list[ReplayResult]:
        out = []
        known = self.replayer.workflow_types
        for run in sorted(self._dirty):
            by_seq = self._runs.get(run)
            if not by_seq or run in self.failed:
                continue
            events = sorted(by_seq.values(), key=lambda e: e["seq"])
            if events[0]["attributes"][0] != "WorkflowExecutionStarted":
                continue
            if events[0]["attributes"][1]["workflow_type"] not in known:
                continue
            (result,) = self.replayer.check([events])
            counts = self.per_type_counts[result.workflow_type]
            if result.ok:
                counts[0] += 1
            else:
                counts[1] += 1
                self.failed[run] = result
            out.append(result)
        self._dirty.clear()
        return out

    def sample(self, on_progress: Callable[[int], object] | None = None) -> list[ReplayResult]:
        """Read the topic to the end offsets it has now, then replay every run held."""
        consumer, ends = self._open()
        self._consumer = consumer
        while True:
            positions = {tp.partition: tp.offset for tp in consumer.position(consumer.assignment())}
            if all(positions.get(p, 0) >= end for p, end in ends.items()):
                break
            taken = self._poll(consumer, 1.0)
            if on_progress is not None and taken:
                on_progress(taken)
        return self._replay_dirty()

    def follow(
        self, on_result: Callable[[ReplayResult], object], stop: threading.Event, *, interval_s: float = 1.0
    ) -> None:
        """After ``sample()``: go on reading, and replay each run whose history grew, every
        ``interval_s`` at most, until ``stop`` is set. ``on_result`` gets every replay's result."""
        consumer = self._consumer
        if consumer is None:
            raise RuntimeError("follow() comes after sample()")
        try:
            next_replay = time.monotonic() + interval_s
            while not stop.is_set():
                self._poll(consumer, min(0.5, interval_s))
                if time.monotonic() >= next_replay:
                    for result in self._replay_dirty():
                        on_result(result)
                    next_replay = time.monotonic() + interval_s
        finally:
            self.close()

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
