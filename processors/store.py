"""Per-shard stores of workflow state and the history of open runs.

``MemoryShardStore`` keeps decoded records in dicts; it is rebuilt from ``{ns}.state`` and
``{ns}.history`` whenever a shard is assigned (see ``restore``). The interface is small so that
an on-disk store (RocksDB) can replace it without touching the state machine.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, cast

from confluent_kafka import Consumer, KafkaException, TopicPartition

from kadence.schemas.records import WorkflowState
from kadence.topics import serde
from kadence.topics.config import KafkaConfig
from kadence.topics.errors import BrokerUnavailableError, SchemaError
from kadence.topics.scan import read_range

from .shard_store import ShardStore

__all__ = ["MemoryShardStore", "read_partition", "restore_shard"]

log = logging.getLogger(__name__)

#: events of open runs a restore holds before it writes them to the store
RESTORE_CHUNK_EVENTS = 20_000


class MemoryShardStore:
    """A ``ShardStore`` (``shard_store.py``) in dicts: states and open runs' events as dicts;
    the encoded records it is offered are not kept."""

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self._states: dict[str, WorkflowState] = {}
        self._history: dict[str, tuple[str, list[Any]]] = {}
        #: request IDs of the open run's events (signals, cancels): retries are answered once
        self._requests: dict[str, set[Any]] = {}
        self._staged: dict[str, bytes] = {}

    def get_state(self, workflow_id: str) -> WorkflowState | None:
        return self._states.get(workflow_id)

    def put_state(self, workflow_id: str, state: WorkflowState, raw: bytes | None = None) -> None:
        self._states[workflow_id] = state

    def delete_state(self, workflow_id: str) -> None:
        self._states.pop(workflow_id, None)
        self.drop_history(workflow_id)

    def stage_state(self, workflow_id: str, raw: bytes | None) -> None:
        if raw is None:
            self._staged.pop(workflow_id, None)
        else:
            self._staged[workflow_id] = raw

    def adopt_staged(self, decode: Callable[[str, bytes], WorkflowState | None]) -> None:
        staged, self._staged = self._staged, {}
        for workflow_id, raw in staged.items():
            st = decode(workflow_id, raw)
            if st is not None:
                self._states[workflow_id] = st

    def get_history(self, workflow_id: str, run_id: str, since: int = 0) -> list[dict[str, Any]]:
        """The run's events with seq > ``since``. Events are kept in seq order from 1, so this is
        a slice: a workflow task costs what it carries, not the whole history."""
        entry = self._history.get(workflow_id)
        if entry is None or entry[0] != run_id:
            return []
        return entry[1][since:]

    def get_history_encoded(self, workflow_id: str, run_id: str, since: int = 0, upto: int | None = None) -> list[Any]:
        """As ``get_history``, up to ``upto``: a workflow task encodes these dicts."""
        events = self.get_history(workflow_id, run_id, since)
        return events if upto is None else [e for e in events if e["seq"] <= upto]

    def append_history(
        self, workflow_id: str, run_id: str, events: list[dict[str, Any]], raws: list[bytes] | None = None
    ) -> None:
        entry = self._history.get(workflow_id)
        if entry is None or entry[0] != run_id:
            entry = (run_id, [])
            self._history[workflow_id] = entry
            self._requests[workflow_id] = set()
        entry[1].extend(events)
        ids = self._requests[workflow_id]
        ids.update(e["request_id"] for e in events if e["request_id"])

    def request_seen(self, workflow_id: str, run_id: str, request_id: str) -> bool:
        entry = self._history.get(workflow_id)
        return entry is not None and entry[0] == run_id and request_id in self._requests.get(workflow_id, ())

    def drop_history(self, workflow_id: str) -> None:
        self._history.pop(workflow_id, None)
        self._requests.pop(workflow_id, None)

    def __len__(self) -> int:
        return len(self._states)

    def open_runs(self) -> int:
        return len(self._history)

    def close(self) -> None:
        """Nothing to release: the dicts go with the store."""


def read_partition(
    config: KafkaConfig,
    topic: str,
    partition: int,
    handle: Callable[[bytes | None, bytes | None, int], None],
    *,
    timeout: float = 120.0,
    label: str = "",
) -> int:
    """Read one partition from its start to its current end (read_committed); returns records read.

    ``handle(key, value, offset)`` is called per record (value None for tombstones).
    ``timeout``: the read gives up (``BrokerUnavailableError``) when it makes no progress for
    that long.
    """
    consumer = Consumer(config.consumer(None, **{"fetch.wait.max.ms": 10}))
    count = 0
    try:
        tp = TopicPartition(topic, partition)
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=timeout)
        except KafkaException as exc:
            raise BrokerUnavailableError(f"cannot read watermarks of {topic}[{partition}]: {exc}") from exc
        if high <= low:
            return 0

        def progress(n: int) -> None:
            log.info("restoring %s %s[%d]: %d records", label, topic, partition, n)

        for msg in read_range(
            consumer, tp, low, high, stall_s=timeout, what=f"restore of {topic}[{partition}]", on_progress=progress
        ):
            handle(msg.key(), msg.value(), msg.offset())
            count += 1
        return count
    finally:
        consumer.close()


def restore_shard(
    config: KafkaConfig,
    state_topic: str,
    history_topic: str,
    partition: int,
    store: ShardStore | None = None,
    *,
    observe: Callable[[str, WorkflowState | None], None] | None = None,
    quarantine: dict[str, str] | None = None,
) -> ShardStore:
    """Rebuild a shard's store (``store``: an empty one to fill; a new ``MemoryShardStore`` by
    default): states from the compacted state topic, then the events of every open run from the
    history topic. ``observe(workflow_id, state_or_None)`` sees every state record read, in order
    (the processor's deadline index is rebuilt from them).

    A workflow whose latest state record, or an event of whose open run, cannot be decoded
    (written by a newer schema version, or damaged) is left out of the store and put in
    ``quarantine`` (workflow ID -> why, naming the record's topic, partition and offset); the
    rest of the shard is restored (decision 0044). Without ``quarantine`` such a record raises
    ``SchemaError``."""
    store = MemoryShardStore(partition) if store is None else store
    state_codec = serde.codec("WorkflowState")
    event_codec = serde.codec("HistoryEvent")
    t0 = time.monotonic()
    open_runs: dict[str, str] = {}
    quarantined: dict[str, str] = {}
    #: offset of each workflow's latest state record (what a quarantine names)
    offsets: dict[str, int] = {}

    def forget(wf: str) -> None:
        store.delete_state(wf)
        open_runs.pop(wf, None)
        if observe is not None:
            observe(wf, None)

    # states: every record is staged as it is read (a later one replaces an earlier one), and
    # only each workflow's latest is decoded: a workflow updated many times since the topic was
    # last compacted costs one decode, not one per update
    def on_state(key: bytes | None, value: bytes | None, offset: int) -> None:
        assert key is not None  # a state record is keyed by its workflow ID
        wf = key.decode()
        store.stage_state(wf, value)
        if value is None:
            offsets.pop(wf, None)
        else:
            offsets[wf] = offset

    def adopt(wf: str, raw: bytes) -> WorkflowState | None:
        try:
            st = cast(WorkflowState, state_codec.decode(raw))
        except SchemaError as exc:
            if quarantine is None:
                raise
            quarantined[wf] = f"its state record {state_topic}[{partition}]@{offsets[wf]} cannot be decoded: {exc}"
            return None
        if observe is not None:
            observe(wf, st)
        if st["status"] == "running":
            open_runs[wf] = st["run_id"]
        return st

    read_partition(config, state_topic, partition, on_state, label="state")
    store.adopt_staged(adopt)
    offsets.clear()

    # the open runs' events go to the store in chunks as they are read, so that memory holds a
    # chunk, not every open run's history (a million open workflows in a shard)
    pending: dict[str, list[tuple[Any, bytes]]] = {}
    held = 0

    def flush() -> None:
        nonlocal held
        for wf, pairs in pending.items():
            pairs.sort(key=lambda pair: pair[0]["seq"])
            store.append_history(wf, open_runs[wf], [e for e, _raw in pairs], [raw for _e, raw in pairs])
        pending.clear()
        held = 0

    def on_event(key: bytes | None, value: bytes | None, offset: int) -> None:
        nonlocal held
        if value is None or key is None:
            return
        wf, run_id, _seq = key.decode().rsplit("/", 2)
        if open_runs.get(wf) == run_id:
            try:
                pending.setdefault(wf, []).append((event_codec.decode(value), value))
            except SchemaError as exc:
                if quarantine is None:
                    raise
                quarantined[wf] = (
                    f"an event of its open run {run_id}, {history_topic}[{partition}]@{offset}, "
                    f"cannot be decoded: {exc}"
                )
                pending.pop(wf, None)
                forget(wf)
                return
            held += 1
            if held >= RESTORE_CHUNK_EVENTS:
                flush()

    if open_runs:
        read_partition(config, history_topic, partition, on_event, label="history")
        flush()
    for wf, why in sorted(quarantined.items()):
        log.error(
            "workflow %s partition %d quarantined: %s; its commands are dead-lettered until a processor "
            "that reads the record restores the shard",
            wf,
            partition,
            why,
        )
    if quarantine is not None:
        quarantine.update(quarantined)
    log.info(
        "restored partition %d: %d workflows (%d open, %d quarantined) in %.2fs",
        partition,
        len(store),
        len(open_runs),
        len(quarantined),
        time.monotonic() - t0,
    )
    return store
