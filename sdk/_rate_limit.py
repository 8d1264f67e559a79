"""A worker's share of its task queue's rate limits (``kadence.topics.queue_limits``, decision 0055).

A queue's limit holds across all its workers without a coordinator: the activity-task topic's
partitions are spread over the workers by their consumer group, so a worker holding ``k`` of the
topic's ``n`` partitions may start ``limit * k / n`` activities a second (token buckets, one for
the queue and one per limited activity type, refilled continuously, holding at most a second's
worth). The shares always add up to the limit; a worker whose partitions have no tasks leaves its
share unused (the cost: with an uneven backlog the queue runs below its limit). A task beyond the
limit waits in the topic or the worker's local backlog, never dropped, and no offset is committed
past it.

A queue has a topic per priority level (decision 0060), and the group's assignor balances the
count of partitions a worker holds, not their lanes: one worker may hold every partition of the
busy lane. So while a limit applies, each worker follows how fast each lane grows (``LaneTraffic``:
the lanes' end offsets, every second) and takes the share of the traffic its partitions receive:
the sum over lanes of (the lane's rate x the lane's partitions it holds / the lane's partitions),
over the queue's rate. Without traffic, the share is of partitions, as before.

``QueueRateLimiter`` is used by the activity-task consumer's thread (``take``, ``wait_s``, the
partition changes, ``refresh``, which polls the limits topic at most every half second); the
worker's loop reads ``limits_type`` (a reference swap, no lock) to run no eager activity of a
paced type (an eager attempt never passes the consumer).
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Collection, Hashable
from typing import Any, cast

from kadence.schemas.records import ActivityTask
from kadence.topics import serde
from kadence.topics.compacted import CompactedTable
from kadence.topics.errors import SchemaError
from kadence.topics.queue_limits import QueueLimit, decode_queue_limit

__all__ = ["QueueRateLimiter", "TokenBucket"]

log = logging.getLogger(__name__)

#: how often the limits topic is polled for a change
REFRESH_S = 0.5


class TokenBucket:
    """``rate`` tokens a second, at most ``max(1, rate)`` held (a second's worth)."""

    def __init__(self, rate: float, now: float) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate)
        self.tokens = 1.0
        self.at = now

    def refill(self, now: float) -> None:
        if now > self.at:
            self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.rate)
        self.at = now

    def set_rate(self, rate: float, now: float) -> None:
        self.refill(now)
        self.rate = rate
        self.capacity = max(1.0, rate)
        self.tokens = min(self.tokens, self.capacity)

    def wait_s(self, now: float) -> float:
        """Seconds until a token is there (0: now)."""
        self.refill(now)
        if self.tokens >= 1.0:
            return 0.0
        return (1.0 - self.tokens) / self.rate if self.rate > 0 else float("inf")


def _where(msg: Any) -> tuple[tuple[str, int], int]:
    """((topic, partition), offset) of a record in the local backlog."""
    return (msg.topic(), msg.partition()), msg.offset()


class QueueRateLimiter:
    """Paces one worker's activity tasks to its share of the queue's limits."""

    def __init__(
        self,
        task_queue: str,
        table: CompactedTable[QueueLimit] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_throttled: Callable[[float], None] | None = None,
    ) -> None:
        self.task_queue = task_queue
        self._table = table
        self._clock = clock
        self._on_throttled = on_throttled
        #: the queue's limits now (None: not limited); swapped whole, read from any thread
        self.limit: QueueLimit | None = None
        self._owned: set[Hashable] = set()
        self._partitions = 0
        #: how many lanes ``_partitions`` counts (each with ``_partitions / _lanes`` of them)
        self._lanes = 1
        #: lane topic -> records a second on it across the queue (``LaneTraffic``; empty: unknown)
        self._lane_rates: dict[str, float] = {}
        #: the rates ``set_lane_rates`` handed over (any thread), applied by ``refresh``
        self._new_rates: dict[str, float] | None = None
        self._queue_bucket: TokenBucket | None = None
        self._type_buckets: dict[str, TokenBucket] = {}
        self._next_refresh = 0.0
        #: what ``pick`` last waited for (``wait_s``)
        self._next_s = 0.0
        #: activity type of the records waiting in the local backlog, by (partition, offset)
        self._types: dict[tuple[tuple[str, int], int], str | None] = {}
        #: when each record of the local backlog was first held back by the limit
        self._held: dict[tuple[tuple[str, int], int], float] = {}
        #: tasks that had to wait for the limit; ``on_throttled(seconds waited)`` as each starts
        self.throttled = 0

    @classmethod
    def following(cls, kafka: Any, topic: str, task_queue: str, **kw: Any) -> QueueRateLimiter:
        """A limiter that follows ``topic`` (read to its end by ``start``)."""
        limiter: QueueRateLimiter
        table: CompactedTable[QueueLimit] = CompactedTable(
            kafka, topic, decode_queue_limit, lambda key, _old, new: limiter._changed(key, new)
        )
        limiter = cls(task_queue, table, **kw)
        return limiter

    def start(self, timeout: float = 30.0) -> None:
        if self._table is not None:
            self._table.start(timeout)

    def close(self) -> None:
        if self._table is not None:
            self._table.close()

    # -- what changes the pace (consumer thread) --------------------------------------------

    def refresh(self) -> None:
        """Apply a change of the limits, if one has arrived (at most every ``REFRESH_S``)."""
        now = self._clock()
        if self._table is not None and now >= self._next_refresh:
            self._next_refresh = now + REFRESH_S
            self._table.poll()
        rates, self._new_rates = self._new_rates, None
        if rates is not None:
            self._lane_rates = rates
            self._rebuild()

    def set_lane_rates(self, rates: dict[str, float]) -> None:
        """How fast each lane grows, across the queue (any thread; applied at the next ``refresh``)."""
        self._new_rates = dict(rates)

    def _changed(self, queue: str, limit: QueueLimit | None) -> None:
        if queue != self.task_queue:
            return
        self.set_limit(limit if limit is not None and limit.limited else None)

    def set_limit(self, limit: QueueLimit | None) -> None:
        if limit != self.limit:
            log.info(
                "task queue %s: activity limits %s",
                self.task_queue,
                "lifted" if limit is None else limit.describe(),
            )
        self.limit = limit
        self._rebuild()

    def set_partitions(self, owned: Collection[Hashable], total: int | None = None, lanes: int | None = None) -> None:
        """The activity-task partitions this worker holds (of ``total``, when it is given): of
        every priority lane, each partition of each lane counted once (the assignor spreads each
        lane's partitions over the workers as it spreads the default lane's)."""
        self._owned = set(owned)
        if total is not None:
            self._partitions = total
        if lanes is not None:
            self._lanes = lanes
        self._rebuild()

    @property
    def share(self) -> float:
        if not self._partitions:
            return 0.0
        traffic = sum(self._lane_rates.values())
        if traffic <= 0:
            return len(self._owned) / self._partitions
        per_lane = self._partitions / self._lanes
        held = collections.Counter(tp[0] for tp in self._owned if isinstance(tp, tuple))
        return sum(rate * held[topic] / per_lane for topic, rate in self._lane_rates.items()) / traffic

    def _rebuild(self) -> None:
        now = self._clock()
        limit, share = self.limit, self.share
        if limit is None or limit.activities_per_second is None:
            self._queue_bucket = None
        elif self._queue_bucket is None:
            self._queue_bucket = TokenBucket(limit.activities_per_second * share, now)
        else:
            self._queue_bucket.set_rate(limit.activities_per_second * share, now)
        types = {} if limit is None else limit.activity_types
        old = self._type_buckets
        self._type_buckets = {}
        for name, rate in types.items():
            bucket = old.get(name)
            if bucket is None:
                bucket = TokenBucket(rate * share, now)
            else:
                bucket.set_rate(rate * share, now)
            self._type_buckets[name] = bucket

    # -- pacing (consumer thread) -----------------------------------------------------------

    @property
    def active(self) -> bool:
        return self.limit is not None

    def pick(self, backlog: Any) -> int | None:
        """The index in ``backlog`` (records in arrival order) of the first task that may start
        now, its tokens taken; None when none may (``wait_s`` says for how long)."""
        if not backlog:
            return None
        if self.limit is None:
            return 0
        now = self._clock()
        queue_bucket = self._queue_bucket
        if queue_bucket is not None:
            wait = queue_bucket.wait_s(now)
            if wait > 0:
                self._hold(backlog[0], now)
                self._next_s = wait
                return None
        soonest = float("inf")
        for i, msg in enumerate(backlog):
            bucket = self._type_buckets.get(self._type_of(msg)) if self._type_buckets else None  # type: ignore[arg-type]
            if bucket is not None:
                wait = bucket.wait_s(now)
                if wait > 0:
                    self._hold(msg, now)
                    soonest = min(soonest, wait)
                    continue
            if bucket is not None:
                bucket.tokens -= 1.0
            if queue_bucket is not None:
                queue_bucket.tokens -= 1.0
            key = _where(msg)
            self._types.pop(key, None)
            since = self._held.pop(key, None)
            if since is not None:
                self.throttled += 1
                if self._on_throttled is not None:
                    self._on_throttled(now - since)
            return i
        self._next_s = soonest
        return None

    def _hold(self, msg: Any, now: float) -> None:
        self._held.setdefault(_where(msg), now)

    def _type_of(self, msg: Any) -> str | None:
        key = _where(msg)
        if key not in self._types:
            try:
                task = cast(ActivityTask, serde.decode("ActivityTask", msg.value()))
                self._types[key] = task["activity_type"]
            except SchemaError:
                self._types[key] = None  # the worker's handler reports it; no type limit applies
        return self._types[key]

    def forget(self, partitions: set[tuple[str, int]]) -> None:
        """Records of revoked partitions left the local backlog."""
        self._types = {k: v for k, v in self._types.items() if k[0] not in partitions}
        self._held = {k: v for k, v in self._held.items() if k[0] not in partitions}

    def wait_s(self) -> float:
        """After ``pick`` found nothing to start: seconds until a token it waited for is there."""
        return max(0.001, self._next_s)

    # -- eager activities (the worker's loop) -----------------------------------------------

    def limits_type(self, activity_type: str) -> bool:
        """Whether activities of this type are paced here (so never run eagerly)."""
        limit = self.limit
        return limit is not None and limit.limits_type(activity_type)
