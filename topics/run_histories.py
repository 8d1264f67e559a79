"""One run's history events read from ``{ns}.history`` for a client, incrementally and cached
(``RunHistories``: the engine client's history reads, so ``handle.history()``, the CLI and the
gateway).

Read your writes: every event whose transaction committed before a read is returned, including
those of a transaction whose reply the caller has read while the history partition's commit
marker was not yet written (Kafka writes them partition by partition). Events of transactions
still open at the read are waited for up to ``scan.SETTLE_S``. And a run for which a reply to
this client said its history had reached seq N (``saw``) is read at least to N, for up to
``SEQ_WAIT_S``.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from .config import KafkaConfig
from .partitioner import partition_for
from .scan import RangeReader

__all__ = ["HISTORY_EVENTS_KEPT", "HISTORY_RUNS_KEPT", "SEQS_KEPT", "SEQ_WAIT_S", "RunHistories"]

log = logging.getLogger(__name__)

#: runs whose history ``read`` keeps, to read only what was appended next time, and at most how
#: many events in all (a run over it is read whole each time)
HISTORY_RUNS_KEPT = 64
HISTORY_EVENTS_KEPT = 100_000
#: runs whose latest history seq this client has seen in a reply (read your writes: ``read``)
SEQS_KEPT = 10_000
#: how long a history read waits for the events a reply it received said were recorded
SEQ_WAIT_S = 5.0


class RunHistories:
    """The history reads of one client: one consumer (and one for the high watermark), kept."""

    def __init__(self, config: KafkaConfig, topic: str, partitions: Callable[[], int], codec: Any) -> None:
        self._config, self._topic, self._partitions, self._codec = config, topic, partitions, codec
        #: (workflow ID, run ID) -> (events by key, offset read up to, events in order), oldest first
        self._runs: collections.OrderedDict[tuple[str, str], Any] = collections.OrderedDict()
        #: (workflow_id, run_id) -> the highest history seq a reply to this client said the run
        #: had reached (``Reply.history_seq``); a read returns at least that far
        self._seen: collections.OrderedDict[tuple[str, str], int] = collections.OrderedDict()
        self._seen_lock = threading.Lock()
        self._lock = threading.Lock()
        self._consumer: Consumer | None = None
        self._end_consumer: Consumer | None = None

    def saw(self, workflow_id: str, run_id: str | None, seq: int | None) -> None:
        """A reply said the run's history had come this far."""
        if not seq or not run_id:
            return
        key = (workflow_id, run_id)
        with self._seen_lock:
            if self._seen.get(key, 0) < seq:
                self._seen[key] = seq
                self._seen.move_to_end(key)
                if len(self._seen) > SEQS_KEPT:
                    self._seen.popitem(last=False)

    def seen(self, workflow_id: str, run_id: str) -> int:
        """The highest seq a reply reported for the run (0: none)."""
        with self._seen_lock:
            return self._seen.get((workflow_id, run_id), 0)

    def read(self, workflow_id: str, run_id: str, timeout: float) -> list[dict[str, Any]]:
        """Every history event of one run, in order (copies: the caller may change them); read at
        least to the seq a reply reported, for up to ``SEQ_WAIT_S`` (see the module)."""
        deadline = time.monotonic() + SEQ_WAIT_S
        while True:
            events = self._read(workflow_id, run_id, timeout)
            need = self.seen(workflow_id, run_id)
            # none at all: an archived run (its events are tombstones), read from the archive
            if not events or events[-1]["seq"] >= need or time.monotonic() >= deadline:
                if events and events[-1]["seq"] < need:
                    log.warning(
                        "the history of workflow %s run %s reads to seq %d, short of the %d a reply reported",
                        workflow_id,
                        run_id,
                        events[-1]["seq"],
                        need,
                    )
                return events
            time.sleep(0.02)  # the broker has not shown them yet: read again from where this read stopped

    def _read(self, workflow_id: str, run_id: str, timeout: float) -> list[dict[str, Any]]:
        prefix = f"{workflow_id}/{run_id}/".encode()
        with self._lock:
            if self._consumer is None:
                self._consumer = Consumer(self._config.consumer(None))
                # asks for the high watermark: a read_committed consumer is told the last stable offset
                self._end_consumer = Consumer(self._config.consumer(None, **{"isolation.level": "read_uncommitted"}))
            consumer = self._consumer
            tp = TopicPartition(self._topic, partition_for(workflow_id, self._partitions()))
            # Read your writes: the read goes on to the high watermark (every record written
            # before it began) and waits up to scan.SETTLE_S past the last stable offset for the
            # transactions still open.
            low, stable = consumer.get_watermark_offsets(tp, timeout=timeout)
            end_consumer = self._end_consumer
            assert end_consumer is not None, "made with the history consumer"
            _low, high = end_consumer.get_watermark_offsets(tp, timeout=timeout)
            kept = self._runs.pop((workflow_id, run_id), None)
            if kept is not None and kept[1] >= low:
                events, pos, ordered = kept
            else:
                events, pos, ordered = {}, low, []
            if pos < high:
                events = dict(events)
                pos = self._scan(consumer, tp, pos, max(high, stable), stable, prefix, events, workflow_id, timeout)
                ordered = sorted(events.values(), key=lambda e: e["seq"])
            self._runs[(workflow_id, run_id)] = (events, pos, ordered)
            total = sum(len(kept[0]) for kept in self._runs.values())
            while self._runs and (len(self._runs) > HISTORY_RUNS_KEPT or total > HISTORY_EVENTS_KEPT):
                _key, (dropped, _pos, _ordered) = self._runs.popitem(last=False)
                total -= len(dropped)
            return [dict(e) for e in ordered]

    def _scan(
        self,
        consumer: Consumer,
        tp: TopicPartition,
        start: int,
        high: int,
        stable: int,
        prefix: bytes,
        events: dict[bytes, dict[str, Any]],
        workflow_id: str,
        timeout: float,
    ) -> int:
        """Read ``tp`` from ``start`` towards ``high`` into ``events`` (the keys starting with
        ``prefix``); returns the offset reached (``stable`` or more)."""
        reader = RangeReader(
            consumer, tp, start, high, stall_s=timeout, settle_from=stable, what=f"the history of {workflow_id!r}"
        )
        try:
            for msg in reader:
                key = msg.key()
                if key and key.startswith(prefix):
                    if msg.value():
                        event = self._codec.decode(msg.value())
                        event["_offset"] = msg.offset()
                        events[key] = event
                    else:  # a tombstone: the event was archived (kadence.topics.archive)
                        events.pop(key, None)
        finally:
            consumer.unassign()
        return reader.position

    def close(self) -> None:
        with self._lock:
            for consumer in (self._consumer, self._end_consumer):
                if consumer is not None:
                    consumer.close()
            self._consumer = self._end_consumer = None
            self._runs.clear()
