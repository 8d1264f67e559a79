"""The records a task consumer has read but not handed to the worker's loop yet, in the order
they are dispatched: by priority lane, then by fairness key (decision 0060).

Both levels are stride scheduling (Waldspurger's): each lane (and, within a lane, each fairness
key) has a *pass*; the one with the lowest pass that has records goes next and its pass grows by
``1 / weight``. So while several wait, each gets dispatches in proportion to its weight (lane 1
sixteen for lane 5's one), none is starved, and one that was idle starts at the current pass
(``_vtime``) instead of with credit saved up while it had nothing. A key's records stay in
arrival order. Consumer thread only.
"""

from __future__ import annotations

import collections
import heapq
import itertools
from collections.abc import Iterable
from typing import Any

from kadence.topics.priority import fairness_of

__all__ = ["LocalBacklog"]

#: (topic, partition)
TP = tuple[str, int]


def _size(msg: Any) -> int:
    value = msg.value()
    return len(value) if value else 0


class _Key:
    __slots__ = ("pass_", "records", "weight")

    def __init__(self, weight: float, pass_: float) -> None:
        self.weight = weight
        self.pass_ = pass_
        self.records: collections.deque[Any] = collections.deque()


class _Lane:
    __slots__ = ("bytes", "count", "heap", "keys", "pass_", "vtime", "weight")

    def __init__(self, weight: float) -> None:
        self.weight = weight
        self.pass_ = 0.0
        #: the pass of the key dispatched last: where a key that was idle starts
        self.vtime = 0.0
        self.keys: dict[bytes, _Key] = {}
        #: (pass, tie-breaker, key) of every key with records (one entry each)
        self.heap: list[tuple[float, int, bytes]] = []
        self.count = 0
        #: the records' value bytes (what the read-ahead holds in memory)
        self.bytes = 0


class LocalBacklog:
    """Records by lane (``lanes``: topic -> weight, first lane first on a tie) and fairness key."""

    def __init__(self, lanes: dict[str, float]) -> None:
        self._lanes = {topic: _Lane(weight) for topic, weight in lanes.items()}
        self._order = {topic: i for i, topic in enumerate(lanes)}
        self._vtime = 0.0
        self._count = 0
        self._tie = itertools.count()

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def lane_count(self, topic: str) -> int:
        return self._lanes[topic].count

    def lane_bytes(self, topic: str) -> int:
        return self._lanes[topic].bytes

    @property
    def topics(self) -> list[str]:
        return list(self._lanes)

    def add(self, msg: Any) -> None:
        lane = self._lanes[msg.topic()]
        key, weight = fairness_of(msg.headers())
        if lane.count == 0:  # an idle lane starts now, with no credit saved
            lane.pass_ = max(lane.pass_, self._vtime)
        k = lane.keys.get(key)
        if k is None:
            k = lane.keys[key] = _Key(weight, lane.vtime)
        k.weight = weight  # the latest record's weight is the key's
        if not k.records:
            k.pass_ = max(k.pass_, lane.vtime)
            heapq.heappush(lane.heap, (k.pass_, next(self._tie), key))
        k.records.append(msg)
        lane.count += 1
        lane.bytes += _size(msg)
        self._count += 1

    def _next_lane(self) -> _Lane | None:
        best: _Lane | None = None
        for lane in self._lanes.values():  # a handful: a scan beats a heap
            if lane.count and (best is None or lane.pass_ < best.pass_):
                best = lane
        return best

    def pop(self) -> Any | None:
        """The record to dispatch next (None: none waits)."""
        lane = self._next_lane()
        if lane is None:
            return None
        _pass, _tie, key = heapq.heappop(lane.heap)
        k = lane.keys[key]
        msg = k.records.popleft()
        self._charge(lane, key, k, msg)
        return msg

    def _charge(self, lane: _Lane, key: bytes, k: _Key, msg: Any) -> None:
        """One of ``key``'s records of ``lane`` was dispatched (it is no longer in the heap)."""
        self._vtime = lane.pass_
        lane.pass_ += 1.0 / lane.weight
        lane.vtime = k.pass_
        k.pass_ += 1.0 / k.weight
        if k.records:
            heapq.heappush(lane.heap, (k.pass_, next(self._tie), key))
        else:
            del lane.keys[key]  # an idle key costs nothing; it starts at the lane's pass again
        lane.count -= 1
        lane.bytes -= _size(msg)
        self._count -= 1

    def ordered(self, most: int | None = None) -> list[Any]:
        """The records (the first ``most`` of them), in about the order ``pop`` would give them
        (lanes and keys by pass, each key's in arrival order): what a rate limit scans for the
        first it lets start."""
        out: list[Any] = []
        lanes = sorted((lane for lane in self._lanes.values() if lane.count), key=lambda lane: lane.pass_)
        for lane in lanes:
            for _pass, _tie, key in sorted(lane.heap):
                out.extend(itertools.islice(lane.keys[key].records, None if most is None else most - len(out)))
                if most is not None and len(out) >= most:
                    return out
        return out

    def take(self, msg: Any) -> None:
        """Dispatch ``msg`` (one of ``ordered()``), charged as ``pop`` would charge it."""
        lane = self._lanes[msg.topic()]
        key, _weight = fairness_of(msg.headers())
        k = lane.keys[key]
        k.records.remove(msg)
        lane.heap = [entry for entry in lane.heap if entry[2] != key]  # ``_charge`` puts it back
        heapq.heapify(lane.heap)
        self._charge(lane, key, k, msg)

    def drop(self, gone: Iterable[TP]) -> None:
        """Forget the records of revoked partitions (their next owner reads them again)."""
        gone = set(gone)
        for lane in self._lanes.values():
            for key, k in list(lane.keys.items()):
                kept = [m for m in k.records if (m.topic(), m.partition()) not in gone]
                dropped = len(k.records) - len(kept)
                if not dropped:
                    continue
                lane.bytes -= sum(_size(m) for m in k.records) - sum(_size(m) for m in kept)
                k.records = collections.deque(kept)
                lane.count -= dropped
                self._count -= dropped
                if not kept:
                    del lane.keys[key]
            lane.heap = [entry for entry in lane.heap if entry[2] in lane.keys]
            heapq.heapify(lane.heap)
