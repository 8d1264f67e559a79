"""Readers of workflow streams (decision 0062): one consumer per process for every reader
(``StreamHub``), so that a thousand readers of one workflow cost Kafka one fetch and the engine
nothing.

The hub assigns a ``{ns}.streams`` partition when a reader of one of its workflows arrives, at
that reader's first offset, and hands each record to the readers of its workflow on their event
loops. A reader that arrives wanting offsets the hub has already passed reads them itself first
(a short-lived consumer from its first offset up to the hub's position at its arrival) while the
hub keeps what comes after for it: the two parts meet at one offset, so nothing is lost or
repeated. A partition no reader wants is unassigned."""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaException, TopicPartition

from .config import KafkaConfig
from .errors import BrokerUnavailableError, KadenceError
from .polling import poll_ready
from .scan import RangeReader
from .streams import StreamEntry, entry_of, stream_partition

__all__ = ["StreamFollower", "StreamHub", "StreamReader", "follow_described"]

log = logging.getLogger(__name__)

#: records of a run may carry a clock a little behind the run's start (another processor's):
#: a reader from a run's start looks this much earlier, and filters by run
CLOCK_SLACK_MS = 60_000
_DONE = object()


class StreamFollower(Protocol):
    """What reads a workflow's stream records: ``EngineClient`` (through its ``StreamHub``) and
    the test kit's in-memory engine."""

    def follow_stream(
        self,
        workflow_id: str,
        *,
        stream: str | None,
        after: int | None = None,
        since_ms: int | None = None,
        accept: Callable[[StreamEntry], bool] = ...,
    ) -> AsyncIterator[StreamEntry]: ...


def follow_described(
    engine: StreamFollower, described: dict[str, Any], *, stream: str | None, after: int | None
) -> AsyncIterator[StreamEntry] | None:
    """The reader of a workflow's stream given its description (``describe_to_json``'s shape):
    after the record ``after``, else from its current run's start (its records, not an earlier
    run's of the same ID); None when the workflow closed without ever publishing (no record was
    or will be written, not even an end). The SDK's ``handle.stream`` and the gateway's
    Server-Sent Events both open their readers here."""
    if described["status"] != "running" and not described.get("streams_used"):
        return None
    workflow_id = described["workflow_id"]
    if after is not None:
        return engine.follow_stream(workflow_id, stream=stream, after=after)
    first_run = described["run_id"]
    start = described.get("start_time")
    began = int(datetime.fromisoformat(start).timestamp() * 1000) if start else 0

    def this_run_on(entry: StreamEntry) -> bool:
        return entry.run_id == first_run or entry.timestamp_ms > began

    return engine.follow_stream(workflow_id, stream=stream, since_ms=began, accept=this_run_on)


class StreamReader(AsyncIterator[StreamEntry]):
    """One reader's entries, in offset order (``async for``); ends after the workflow's ``end``
    record (which it yields) or ``aclose()``."""

    def __init__(
        self,
        hub: StreamHub,
        workflow_id: str,
        stream: str | None,
        first: int,
        accept: Callable[[StreamEntry], bool],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.hub, self.workflow_id, self.stream = hub, workflow_id, stream
        #: the records' key (compared with every record of the partition)
        self.key = workflow_id.encode()
        self.partition = -1
        #: the first offset not yet handed over (the hub's and the catch-up's records below it are skipped)
        self.next_offset = first
        self._accept = accept
        self._loop = loop
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._lock = threading.Lock()
        #: the hub's records kept while the reader catches up (None: live)
        self._held: list[StreamEntry] | None = None
        #: no more entries will be handed over (set by the hub's and the catch-up's threads)
        self.done = False
        #: the reader has taken the last item (its loop's flag)
        self._finished = False

    def __aiter__(self) -> StreamReader:
        return self

    async def __anext__(self) -> StreamEntry:
        # ``done`` is the other threads' flag, set before what they hand over reaches the queue
        # (through the loop): the queue alone says when the reader has had everything
        if self._finished:
            raise StopAsyncIteration
        item = await self._queue.get()
        if item is _DONE:
            self._finished = True
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            self._finished = True
            raise item
        return item  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        self._finished = True
        self.hub.leave(self)

    # -- the hub's and the catch-up's side (other threads) -----------------------------------

    def offer(self, entry: StreamEntry, *, catching_up: bool = False) -> bool:
        """Hand ``entry`` over if it is the reader's; False once the reader is done."""
        with self._lock:
            if self.done:
                return False
            if self._held is not None and not catching_up:
                self._held.append(entry)
                return True
            return self._deliver(entry)

    def caught_up(self) -> bool:
        with self._lock:
            held, self._held = self._held or [], None
            for entry in held:
                if not self._deliver(entry):
                    return False
            return not self.done

    def fail(self, exc: BaseException) -> None:
        with self._lock:
            if not self.done:
                self.done = True
                self._loop.call_soon_threadsafe(self._queue.put_nowait, exc)

    def _deliver(self, entry: StreamEntry) -> bool:
        if entry.offset < self.next_offset:
            return not self.done
        self.next_offset = entry.offset + 1
        if entry.end:
            self.done = True
            self._loop.call_soon_threadsafe(self._queue.put_nowait, entry)
            self._loop.call_soon_threadsafe(self._queue.put_nowait, _DONE)
            return False
        if (self.stream is None or entry.stream == self.stream) and self._accept(entry):
            self._loop.call_soon_threadsafe(self._queue.put_nowait, entry)
        return True


class StreamHub:
    """The process's reader of ``{ns}.streams`` (``follow``); made on first use, ``close()`` ends it."""

    def __init__(self, config: KafkaConfig, topic: str) -> None:
        self.config, self.topic = config, topic
        self._lock = threading.Lock()
        self._requests: collections.deque[tuple[str, StreamReader, int | None]] = collections.deque()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: Consumer | None = None
        #: finds where a reader from a time starts (``_offset_at``), made on first use
        self._lookup: Consumer | None = None
        self._partitions = 0
        self._readers: dict[int, list[StreamReader]] = {}
        #: per assigned partition: the offset after the last record the hub handed out
        self._next: dict[int, int] = {}

    def follow(
        self,
        workflow_id: str,
        *,
        stream: str | None,
        after: int | None = None,
        since_ms: int | None = None,
        accept: Callable[[StreamEntry], bool] = lambda _e: True,
    ) -> StreamReader:
        """A reader of ``workflow_id``'s records (of ``stream``, or of all its streams): those after
        offset ``after``, else those from about ``since_ms`` on (``accept`` picks the run's),
        else from the partition's start."""
        reader = StreamReader(
            self, workflow_id, stream, 0 if after is None else after + 1, accept, asyncio.get_running_loop()
        )
        with self._lock:
            if self._closed.is_set():
                raise KadenceError("the stream reader is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="kadence-streams", daemon=True)
                self._thread.start()
            self._requests.append(("join", reader, None if after is not None else since_ms))
        self._wake.set()
        return reader

    def leave(self, reader: StreamReader) -> None:
        with reader._lock:
            reader.done = True
        with self._lock:
            self._requests.append(("leave", reader, None))
        self._wake.set()

    def close(self) -> None:
        self._closed.set()
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(5)

    # -- the hub's thread ------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._consumer = Consumer(self.config.consumer(None, **{"fetch.wait.max.ms": 20}))
            md = self._consumer.list_topics(self.topic, timeout=10)
            meta = md.topics.get(self.topic)
            if meta is None or meta.error is not None or not meta.partitions:
                raise BrokerUnavailableError(f"topic {self.topic} cannot be read: {meta and meta.error}")
            self._partitions = len(meta.partitions)
        except (KafkaException, KadenceError) as exc:
            self._stopped(exc if isinstance(exc, KadenceError) else BrokerUnavailableError(str(exc)))
            return
        try:
            while not self._closed.is_set():
                self._take_requests()
                if not self._next:
                    self._wake.wait(0.5)
                    self._wake.clear()
                    continue
                # (consume(500, 0.05) waited for 500 records or the whole 50 ms: the bench's
                # accepted-to-SSE p50 was 33 ms with one reader)
                for msg in poll_ready(self._consumer, 500, 0.05):
                    self._hand_out(msg)
        except KafkaException as exc:  # the consumer itself failed: its readers hear of it
            log.error("the stream reader of %s failed: %s", self.topic, exc)
        finally:
            self._stopped()

    def _stopped(self, exc: BaseException | None = None) -> None:
        """The thread ends: its readers fail (a client reconnects and resumes after its last
        event), and the next ``follow`` starts a new thread with new consumers. The requests
        still queued are failed and the thread forgotten under one lock, so that a ``follow``
        either is failed here or starts the next thread, never waits for this one."""
        exc = exc or BrokerUnavailableError(f"the stream reader of {self.topic} stopped; resume after the last event")
        for readers in self._readers.values():
            for reader in readers:
                reader.fail(exc)
        self._readers.clear()
        self._next.clear()
        for consumer in (self._consumer, self._lookup):
            if consumer is not None:
                consumer.close()
        self._consumer = self._lookup = None
        with self._lock:
            pending = [r for kind, r, _ in self._requests if kind == "join"]
            self._requests.clear()
            self._thread = None
        for reader in pending:
            reader.fail(exc)

    def _take_requests(self) -> None:
        while True:
            with self._lock:
                if not self._requests:
                    return
                kind, reader, since_ms = self._requests.popleft()
            if kind == "leave":
                self._drop(reader)
            else:
                try:
                    self._join(reader, since_ms)
                except (KafkaException, KadenceError) as exc:
                    reader.fail(exc if isinstance(exc, KadenceError) else BrokerUnavailableError(str(exc)))

    def _join(self, reader: StreamReader, since_ms: int | None) -> None:
        assert self._consumer is not None
        p = reader.partition = stream_partition(reader.workflow_id, self._partitions)
        if since_ms is not None:
            reader.next_offset = self._offset_at(p, since_ms - CLOCK_SLACK_MS)
        self._readers.setdefault(p, []).append(reader)
        log.debug(
            "stream reader of %s joins partition %d at %d (the hub at %s)",
            reader.workflow_id,
            p,
            reader.next_offset,
            self._next.get(p),
        )
        if p not in self._next:  # the hub reads the partition from this reader's first offset
            self._consumer.incremental_assign([TopicPartition(self.topic, p, reader.next_offset)])
            self._next[p] = reader.next_offset
        elif reader.next_offset < self._next[p]:  # what the hub has passed: the reader reads it itself
            reader._held = []
            end = self._next[p]
            threading.Thread(
                target=self._catch_up, args=(reader, end), name="kadence-streams-catch-up", daemon=True
            ).start()

    def _offset_at(self, p: int, at_ms: int) -> int:
        """The first offset written at ``at_ms`` or later, committed or not.

        Asked of a read_uncommitted client: a read_committed one does not see the records of a
        transaction still open, so it answered "nothing since then" and the high watermark
        while the values a reader wanted were being committed below it (a test's readers lost a
        workflow's first values that way). Read from here, read_committed, they come once
        committed; when nothing at all was written since, every later record lies past the high
        watermark, read before the lookup."""
        if self._lookup is None:
            self._lookup = Consumer(self.config.consumer(None, **{"isolation.level": "read_uncommitted"}))
        # the end first: what is written between the two calls lies past it (the other order
        # lost the values written between "nothing since then" and reading the end)
        _low, high = self._lookup.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10, cached=False)
        found = self._lookup.offsets_for_times([TopicPartition(self.topic, p, max(0, at_ms))], timeout=10)
        if found and found[0].offset >= 0:
            return int(found[0].offset)
        return int(high)

    def _catch_up(self, reader: StreamReader, end: int) -> None:
        consumer = Consumer(self.config.consumer(None))
        tp = TopicPartition(self.topic, reader.partition, reader.next_offset)
        try:
            consumer.assign([tp])
            for msg in RangeReader(
                consumer, tp, reader.next_offset, end, what=f"stream catch-up {tp.topic}[{tp.partition}]"
            ):
                if msg.key() == reader.key:
                    entry = entry_of(msg)
                    if entry is not None and not reader.offer(entry, catching_up=True):
                        return
            reader.caught_up()
        except (KafkaException, KadenceError) as exc:
            reader.fail(exc if isinstance(exc, KadenceError) else BrokerUnavailableError(str(exc)))
        finally:
            consumer.close()

    def _drop(self, reader: StreamReader) -> None:
        readers = self._readers.get(reader.partition)
        if readers is None or reader not in readers:
            return
        readers.remove(reader)
        if not readers:
            del self._readers[reader.partition], self._next[reader.partition]
            assert self._consumer is not None
            self._consumer.incremental_unassign([TopicPartition(self.topic, reader.partition)])

    def _hand_out(self, msg: Any) -> None:
        if msg.error():
            log.warning("stream reader: %s", msg.error())
            return
        p, offset = msg.partition(), msg.offset()
        readers = self._readers.get(p)
        if not readers:
            return
        self._next[p] = offset + 1
        key = msg.key()
        entry: StreamEntry | None = None
        for reader in list(readers):
            if key != reader.key:
                continue
            entry = entry or entry_of(msg)
            if entry is None:
                return
            if not reader.offer(entry):
                self._drop(reader)
