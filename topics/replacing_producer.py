"""A producer that is replaced when it stops delivering while the broker answers.

librdkafka 2.16 can leave an idempotent producer that lived through a broker restart wedged: it
accepts records and never sends them to some partitions, and each one fails five minutes later
with ``Local: Message timed out``, while a new producer in the same process delivers at once
(seen in a ``make chaos`` seed after a 51 s broker restart: a worker's commands to two of four
partitions timed out for five minutes; open upstream reports with the same signature: librdkafka
#5430, #5593). Nothing in the client's configuration avoids it, so the engine client watches for
it: when its oldest undelivered record is older than ``stall_s`` and the broker answers a metadata
request naming a leader for every partition of that record's topic, the producer is replaced and
every undelivered record is produced again, in the order it was first produced.

The bookkeeping costs ~4 us a record (measured: 1.5-3 us for ``Producer.produce`` alone, 5.4-6
us through this class). Producing a record twice is safe for what goes through here: every command carries a request ID
that the history processor deduplicates, and a task result that arrives twice finds its task
already closed (``docs/architecture.md``, "Who writes what").
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, ClusterMetadata

from .produce import produce_waiting

__all__ = ["ReplacingProducer"]

log = logging.getLogger(__name__)


class ReplacingProducer:
    """The subset of ``confluent_kafka.Producer`` the engine client uses, plus ``watch()``.

    Thread-safe. ``watch()`` is called by the thread that polls (``EngineClient``'s poller)."""

    def __init__(
        self,
        conf: dict[str, Any],
        *,
        stall_s: float = 30.0,
        factory: Callable[[dict[str, Any]], Producer] = Producer,
        probe_factory: Callable[[dict[str, Any]], AdminClient] = AdminClient,
    ) -> None:
        self._conf = conf
        self._factory = factory
        #: makes the client that asks for metadata when the producer gets none (``_ask_apart``)
        self._probe_factory = probe_factory
        self.stall_s = stall_s
        self._producer = factory(conf)
        self._generation = 0
        self._lock = threading.Lock()
        #: sequence number -> [generation, topic, key, value, on_delivery, produced at (monotonic),
        #: the record's timestamp (ms; 0: the producer's clock)]
        self._outstanding: dict[int, list[Any]] = {}
        self._seq = itertools.count()
        self._next_check = time.monotonic() + stall_s
        #: how many times the producer was replaced
        self.replacements = 0

    # -- the Producer subset -------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        on_delivery: Callable[..., None] | None = None,
        timestamp: int = 0,
    ) -> None:
        """Like ``Producer.produce``; raises ``BufferError`` / ``KafkaException`` the same way.
        ``timestamp`` (ms) is kept: a record produced again carries the same one."""
        # no lock here (it cost ~2 us a record): the dict store is atomic, and a record recorded
        # with the generation just replaced is produced again by ``_replace`` (at worst twice)
        seq = next(self._seq)
        generation, producer = self._generation, self._producer
        self._outstanding[seq] = [generation, topic, key, value, on_delivery, time.monotonic(), timestamp]
        try:
            producer.produce(
                topic, value, key, timestamp=timestamp, on_delivery=functools.partial(self._delivered, seq, generation)
            )
        except BaseException:
            self._outstanding.pop(seq, None)
            raise

    def poll(self, timeout: float = 0.0) -> int:
        return self._producer.poll(timeout)

    def flush(self, timeout: float) -> int:
        return self._producer.flush(timeout)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        metadata: ClusterMetadata = self._producer.list_topics(topic, timeout=timeout)
        return metadata

    def outstanding(self) -> int:
        return len(self._outstanding)

    # -- delivery and replacement --------------------------------------------------------------

    def _delivered(self, seq: int, generation: int, err: KafkaError | None, msg: Message) -> None:
        with self._lock:
            entry = self._outstanding.get(seq)
            if entry is None or entry[0] != generation:  # produced again by a newer producer
                return
            del self._outstanding[seq]
        if entry[4] is not None:
            entry[4](err, msg)

    def watch(self) -> bool:
        """Replace the producer if it is wedged (see the module docstring); True if it was.
        Cheap when called often: it looks at most every ``stall_s / 4`` seconds."""
        now = time.monotonic()
        if now < self._next_check:
            return False
        self._next_check = now + self.stall_s / 4
        pending = list(self._outstanding.values())  # one C-level copy: atomic under the GIL
        if not pending:
            return False
        oldest = min(pending, key=lambda e: e[5])
        if now - oldest[5] < self.stall_s or not self._leaders_known(oldest[1]):
            return False
        self._replace(now - oldest[5])
        self._next_check = time.monotonic() + self.stall_s
        return True

    def _leaders_known(self, topic: str) -> bool:
        """Whether the broker answers and names a leader for every partition of ``topic`` (if
        it does not, the records wait for the broker, not for a new producer). Asked through
        the producer, and when the producer gets no answer, through a client of its own made for
        the question: a wedged producer may not get its metadata either (a chaos seed's worker
        had its commands time out after five minutes, never replaced, while the broker served
        the other clients)."""
        try:
            md = self._producer.list_topics(topic, timeout=5)
        except KafkaException:
            md = self._ask_apart(topic)
            if md is None:
                return False
        tmd = md.topics.get(topic)
        if tmd is None or tmd.error is not None or not tmd.partitions:
            return False
        return all(p.leader >= 0 and p.error is None for p in tmd.partitions.values())

    def _ask_apart(self, topic: str) -> ClusterMetadata | None:
        """``topic``'s metadata through a new client (dropped after), or None if it gets none.

        A new one each time, not one kept: this runs only while records are stalled, at most
        once per ``stall_s / 4``, and a kept client could wedge like the producer it checks."""
        try:
            client = self._probe_factory(self._conf)
            return client.list_topics(topic, timeout=5)
        except KafkaException:
            return None

    def _replace(self, stalled_s: float) -> None:
        new = self._factory(self._conf)
        with self._lock:
            old = self._producer
            self._producer = new
            self._generation += 1
            generation = self._generation
            entries = sorted(list(self._outstanding.items()))
            now = time.monotonic()
            for _seq, entry in entries:
                entry[0] = generation
                entry[5] = now
        self.replacements += 1
        log.warning(
            "producer delivered nothing for %.0f s while the broker answers; replaced it and producing "
            "%d undelivered records again (librdkafka #5430)",
            stalled_s,
            len(entries),
        )
        for seq, entry in entries:
            produce_waiting(
                new,
                entry[1],
                entry[3],
                entry[2],
                timestamp=entry[6],
                on_delivery=functools.partial(self._delivered, seq, generation),
            )
        try:  # the old producer's callbacks name an old generation: they are ignored
            old.purge(in_queue=True, in_flight=True, blocking=False)
            old.flush(0)
        except (KafkaException, RuntimeError) as exc:
            log.debug("old producer: %s", exc)
