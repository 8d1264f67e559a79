"""A worker's activity slots (``max_concurrent_activities``), shared by its activity-task
consumer and its eager activities (``_eager_activities``): an attempt runs only in a slot it
took, whichever way it came, so the limit holds across both (thread-safe: the consumer takes
slots on its thread, eager activities on the event loop)."""

from __future__ import annotations

import threading

__all__ = ["Slots"]


class Slots:
    def __init__(self, total: int) -> None:
        self.total = total
        self._used = 0
        self._lock = threading.Lock()
        #: set whenever a slot is given back (the consumer waits on it with a backlog)
        self.freed = threading.Event()

    def take(self, n: int = 1) -> int:
        """Take up to ``n`` free slots; how many were taken."""
        with self._lock:
            k = max(0, min(n, self.total - self._used))
            self._used += k
            return k

    def give_back(self, n: int = 1, *, wake: bool = True) -> None:
        """``wake=False``: the taker puts back a slot it did not use (nobody was refused it
        meanwhile worth waking: a waiter would find the same reason to wait)."""
        if n <= 0:
            return
        with self._lock:
            self._used -= n
        if wake:
            self.freed.set()

    @property
    def used(self) -> int:
        return self._used
