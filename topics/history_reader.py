"""Read whole runs from the history topic (for replay checks and operators' tools)."""

from __future__ import annotations

import collections

from . import serde
from .catalogue import Catalogue
from .config import KafkaConfig
from .scan import scan

__all__ = ["read_runs"]

_CLOSES = {"WorkflowExecutionCompleted", "WorkflowExecutionFailed", "WorkflowExecutionCanceled",
           "WorkflowExecutionTerminated", "WorkflowExecutionContinuedAsNew", "WorkflowExecutionTimedOut"}


def read_runs(config: KafkaConfig, *, closed_only: bool = True, timeout: float = 60.0) -> list[list[dict]]:
    """Every run in ``{ns}.history`` (oldest first per run), committed events only.

    Reads the whole topic: meant for CI checks and development-sized namespaces."""
    runs: dict = collections.OrderedDict()
    for msg in scan(config, Catalogue(config).history, timeout=timeout):
        if msg.value():
            ev = serde.decode("HistoryEvent", msg.value())
            runs.setdefault((ev["aggregate_key"], ev["run_id"]), []).append(ev)
    out = []
    for events in runs.values():
        events.sort(key=lambda e: e["seq"])
        if closed_only and events[-1]["attributes"][0] not in _CLOSES:
            continue
        out.append(events)
    return out
