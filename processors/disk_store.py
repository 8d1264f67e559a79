"""``DiskShardStore``: a shard's workflow states and open-run histories in RocksDB (rocksdict).

The memory store keeps every decoded state dict in the processor's heap (about 5-6 KB per idle
open workflow, measured); this one keeps the encoded Avro records on disk, so the heap holds only
a bounded LRU of recently used decoded states. It has the same interface as
``MemoryShardStore`` and the same lifecycle: the database is created empty when a shard is
assigned and filled from ``{ns}.state`` / ``{ns}.history`` by ``restore_shard`` (so it can never
be ahead of, or disagree with, what Kafka has committed), and removed when the shard is released.

Key layout (one database per partition):

* ``s<workflow_id>``                          -> WorkflowState (wire bytes)
* ``r<workflow_id>``                          -> run ID of the history kept below
* ``h<workflow_id>\\x00<seq, 8 bytes BE>``    -> HistoryEvent (wire bytes) of that run
* ``q<workflow_id>\\x00<request_id>``         -> b"" (request IDs of that run's events)
"""

from __future__ import annotations

import shutil
import struct
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

from rocksdict import Options, Rdict, ReadOptions, WriteBatch, WriteOptions

from kadence.schemas.records import WorkflowState
from kadence.topics import serde
from kadence.topics.avro_binary import Encoded

__all__ = ["DiskShardStore"]

_SEQ = struct.Struct(">Q")


def _options() -> Options:
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    # small memtables: a shard's write rate is modest and memory is what this store is for
    opts.set_write_buffer_size(4 << 20)
    opts.set_max_write_buffer_number(2)
    return opts


class DiskShardStore:
    """A ``ShardStore`` (``shard_store.py``) in a RocksDB directory, one per partition (wiped at
    open: it is rebuilt from Kafka). It keeps records encoded, as Kafka has them."""

    def __init__(self, partition: int, path: Path, *, cache_size: int = 1024) -> None:
        self.partition = partition
        self.path = Path(path)
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir(parents=True, exist_ok=True)
        self._db = Rdict(str(self.path), _options())
        # no write-ahead log: the database is wiped at open and rebuilt from Kafka, so nothing in
        # it has to survive a crash (measured: a put costs a third of what it costs with the WAL)
        no_wal = WriteOptions()
        no_wal.disable_wal = True  # type: ignore[method-assign,assignment]  # a property; the stub says method
        self._db.set_write_options(no_wal)
        self._state_codec = serde.codec("WorkflowState")
        self._event_codec = serde.codec("HistoryEvent")
        self._cache: OrderedDict[str, WorkflowState] = OrderedDict()
        self._cache_size = cache_size
        self._count = 0
        self._open = 0

    # -- states ---------------------------------------------------------------------------------

    def get_state(self, workflow_id: str) -> WorkflowState | None:
        st = self._cache.get(workflow_id)
        if st is not None:
            self._cache.move_to_end(workflow_id)
            return st
        raw = self._db.get(b"s" + workflow_id.encode())
        if raw is None:
            return None
        st = cast(WorkflowState, self._state_codec.decode(raw))
        self._remember(workflow_id, st)
        return st

    def put_state(self, workflow_id: str, state: WorkflowState, raw: bytes | None = None) -> None:
        key = b"s" + workflow_id.encode()
        if workflow_id not in self._cache and self._db.get(key) is None:
            self._count += 1
        self._db[key] = raw if raw is not None else self._state_codec.encode(state)
        self._remember(workflow_id, state)

    def delete_state(self, workflow_id: str) -> None:
        key = b"s" + workflow_id.encode()
        if workflow_id in self._cache or self._db.get(key) is not None:
            self._count -= 1
        self._cache.pop(workflow_id, None)
        del self._db[key]
        self.drop_history(workflow_id)

    def stage_state(self, workflow_id: str, raw: bytes | None) -> None:
        key = b"s" + workflow_id.encode()
        if raw is None:
            del self._db[key]
        else:
            self._db[key] = raw

    def adopt_staged(self, decode: Callable[[str, bytes], WorkflowState | None]) -> None:
        dropped = WriteBatch(raw_mode=True)
        for key, raw in self._range(b"s", b"s"):
            if decode(key[1:].decode(), raw) is None:
                dropped.delete(key)
            else:
                self._count += 1
        self._db.write(dropped)

    def _remember(self, workflow_id: str, st: WorkflowState) -> None:
        self._cache[workflow_id] = st
        self._cache.move_to_end(workflow_id)
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    # -- open-run histories ---------------------------------------------------------------------

    def _run(self, workflow_id: str) -> str | None:
        raw = self._db.get(b"r" + workflow_id.encode())
        return raw.decode() if raw is not None else None

    def get_history(self, workflow_id: str, run_id: str, since: int = 0) -> list[dict[str, Any]]:
        """The run's events with seq > ``since``, in seq order."""
        if self._run(workflow_id) != run_id:
            return []
        prefix = b"h" + workflow_id.encode() + b"\x00"
        decode = self._event_codec.decode
        return [decode(v) for _k, v in self._range(prefix, prefix + _SEQ.pack(since + 1))]

    def get_history_encoded(self, workflow_id: str, run_id: str, since: int = 0, upto: int | None = None) -> list[Any]:
        """The run's events with ``since`` < seq <= ``upto``, as Avro bodies (``Encoded``) that a
        workflow task takes without decoding them; an event written with an older schema
        version is returned decoded."""
        if self._run(workflow_id) != run_id:
            return []
        prefix = b"h" + workflow_id.encode() + b"\x00"
        out = []
        body_of = self._event_codec.current_body
        for key, raw in self._range(prefix, prefix + _SEQ.pack(since + 1)):
            if upto is not None and _SEQ.unpack(key[-8:])[0] > upto:
                break
            # kept encoded only when in the version this process writes (a pinned writer's
            # tasks must not carry bodies of a newer schema: serde.write_version), in either
            # wire format (decision 0056)
            body = body_of(raw)
            out.append(Encoded(body) if body is not None else self._event_codec.decode(raw))
        return out

    def _range(self, prefix: bytes, start: bytes) -> Iterator[tuple[bytes, bytes]]:
        # the upper bound stops the iterator at the end of the prefix; without it, stepping past
        # the last key walks over every deleted key that follows (closed runs' histories, until
        # compaction): 117 us per step measured, most of the store's time
        bounded = ReadOptions()
        bounded.set_iterate_upper_bound(prefix[:-1] + bytes((prefix[-1] + 1,)))
        it = self._db.iter(bounded)
        it.seek(start)
        while it.valid():
            yield it.key(), it.value()
            it.next()

    def append_history(
        self, workflow_id: str, run_id: str, events: list[dict[str, Any]], raws: list[bytes] | None = None
    ) -> None:
        wid = workflow_id.encode()
        wb = WriteBatch(raw_mode=True)
        if self._run(workflow_id) != run_id:
            self._drop_into(wb, workflow_id)
            wb.put(b"r" + wid, run_id.encode())
            self._open += 1
        encode = self._event_codec.encode
        for i, ev in enumerate(events):
            wb.put(b"h" + wid + b"\x00" + _SEQ.pack(ev["seq"]), raws[i] if raws is not None else encode(ev))
            if ev["request_id"]:
                wb.put(b"q" + wid + b"\x00" + ev["request_id"].encode(), b"")
        self._db.write(wb)

    def request_seen(self, workflow_id: str, run_id: str, request_id: str) -> bool:
        wid = workflow_id.encode()
        return self._run(workflow_id) == run_id and self._db.get(b"q" + wid + b"\x00" + request_id.encode()) is not None

    def drop_history(self, workflow_id: str) -> None:
        wb = WriteBatch(raw_mode=True)
        if self._drop_into(wb, workflow_id):
            self._db.write(wb)

    def _drop_into(self, wb: WriteBatch, workflow_id: str) -> bool:
        wid = workflow_id.encode()
        if self._db.get(b"r" + wid) is None:
            return False
        self._open -= 1
        wb.delete(b"r" + wid)
        # point deletes, not delete_range: range tombstones slowed every later read of the
        # database (each get and seek checks them until compaction)
        for tag in (b"h", b"q"):
            prefix = tag + wid + b"\x00"
            for key, _ in self._range(prefix, prefix):
                wb.delete(key)
        return True

    # -- sizes and lifecycle --------------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    def open_runs(self) -> int:
        return self._open

    def close(self) -> None:
        """Release the database and delete its directory (the shard moved or the process stops)."""
        self._cache.clear()
        try:
            self._db.close()
        finally:
            shutil.rmtree(self.path, ignore_errors=True)
