"""Label values that come from input (a workflow type named in a start request), kept bounded.

A metric labelled by workflow type grows one time series per distinct type. Types come from
code, but a start request may name any type, so the label set is capped: the first ``limit``
distinct values are kept, and every later one is reported as ``OTHER``. One instance per metric
family and process."""

from __future__ import annotations

import threading

__all__ = ["OTHER", "BoundedLabel"]

#: the value reported for a label once the cap is reached
OTHER = "_other"


class BoundedLabel:
    """``value(raw)``: ``raw`` while fewer than ``limit`` distinct values were seen (or ``raw``
    was one of them), else ``OTHER``. Thread-safe."""

    def __init__(self, limit: int = 200) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def value(self, raw: str | None) -> str:
        raw = raw or ""
        if raw in self._seen:
            return raw
        with self._lock:
            if raw in self._seen or len(self._seen) < self.limit:
                self._seen.add(raw)
                return raw
        return OTHER
