"""Read whole runs from the history topic (for replay checks and operators' tools)."""

from __future__ import annotations

import collections
from typing import Any

from . import serde
from .catalogue import Catalogue
from .config import KafkaConfig
from .records import CLOSE_EVENTS
from .scan import scan

__all__ = ["read_runs"]


def read_runs(config: KafkaConfig, *, closed_only: bool = True, timeout: float = 60.0) -> list[list[dict[str, Any]]]:
    """Every run in ``{ns}.history`` (oldest first per run), committed events only.

    Reads the whole topic: meant for CI checks and development-sized namespaces. Tombstones
    (archival) delete their event, so an archived run is not listed."""
    runs: dict[tuple[str, str], dict[int, dict[str, Any]]] = collections.OrderedDict()
    for msg in scan(config, Catalogue(config).history, timeout=timeout):
        key = msg.key()
        if key is None:
            continue
        wf, run_id, seq = key.decode().rsplit("/", 2)
        if msg.value():
            ev = serde.decode("HistoryEvent", msg.value())
            runs.setdefault((wf, run_id), {})[int(seq)] = ev
        elif (wf, run_id) in runs:  # a tombstone (archival) deletes the event
            runs[(wf, run_id)].pop(int(seq), None)
    out = []
    for by_seq in runs.values():
        if not by_seq:
            continue
        events = sorted(by_seq.values(), key=lambda e: e["seq"])
        if closed_only and events[-1]["attributes"][0] not in CLOSE_EVENTS:
            continue
        out.append(events)
    return out
