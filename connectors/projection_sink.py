"""Apply batches of ``{ns}.history`` records to the Redis projections: one pipeline (one round
trip) per batch, one Lua call per projection (see ``visibility_sink`` and ``history_sink``).

Used by the live Faust agent (``projection_app``) and by the rebuild (``rebuild``), so both
write exactly the same thing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from kadence.readmodels.keys import PROJECTIONS, ProjectionKeys
from kadence.topics import serde
from kadence.topics.errors import SchemaError

from .history_sink import HISTORY_LUA
from .visibility_sink import VISIBILITY_LUA, visibility_op

__all__ = ["BatchResult", "ProjectionSink", "RawRecord"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RawRecord:
    """One record of the history topic as consumed: partition, offset, key, value (None for a
    tombstone), broker timestamp in ms."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int = 0


@dataclass
class BatchResult:
    applied: int = 0
    duplicates: int = 0
    gaps: int = 0
    skipped: int = 0  # records that are not history events (undecodable key or value)


def _split_key(key: bytes | None) -> tuple[str, str, int] | None:
    if key is None:
        return None
    try:
        wf, run, seq = key.decode().rsplit("/", 2)
        return wf, run, int(seq)
    except (AttributeError, UnicodeDecodeError, ValueError):
        return None


class ProjectionSink:
    """Writes history records into the projections of one namespace."""

    def __init__(self, redis: Redis, namespace: str, projections: tuple[str, ...] = PROJECTIONS) -> None:
        self.redis = redis
        self.namespace = namespace
        self.keys = {name: ProjectionKeys(namespace, name) for name in projections}
        self._scripts = {}
        if "visibility" in self.keys:
            self._scripts["visibility"] = redis.register_script(VISIBILITY_LUA)
        if "history" in self.keys:
            self._scripts["history"] = redis.register_script(HISTORY_LUA)

    def _prepare(self, records: list[RawRecord], result: BatchResult) -> tuple[list[str], list[Any]]:
        vis_ops: list[str] = []
        hist_args: list[Any] = []
        for r in records:
            if r.value is None:
                parts = _split_key(r.key)
                if parts is None:
                    result.skipped += 1
                    log.warning(
                        "history tombstone with an unreadable key at partition %s offset %s", r.partition, r.offset
                    )
                    continue
                wf, run, seq = parts
                vis_ops.append(visibility_op(None, r.partition, r.offset, workflow_id=wf, run_id=run, seq=seq))
                hist_args += [wf, run, seq, r.partition, r.offset, b""]
                continue
            try:
                ev = serde.decode("HistoryEvent", r.value)
            except SchemaError as exc:
                result.skipped += 1
                log.error("undecodable history record at partition %s offset %s: %s", r.partition, r.offset, exc)
                continue
            vis_ops.append(visibility_op(ev, r.partition, r.offset))
            hist_args += [ev["aggregate_key"], ev["run_id"], ev["seq"], r.partition, r.offset, r.value]
        return vis_ops, hist_args

    async def apply(self, records: list[RawRecord], generations: dict[str, int] | None = None) -> BatchResult:
        """Apply a batch. ``generations`` None: the live mode (current generation, plus the one a
        rebuild is filling); else the generation to write for each projection."""
        result = BatchResult()
        vis_ops, hist_args = self._prepare(records, result)
        if not records:
            return result
        pipe = self.redis.pipeline(transaction=False)
        names = []
        for name, keys in self.keys.items():
            mode = "live" if generations is None else str(generations[name])
            args = [keys.base, mode] + (vis_ops if name == "visibility" else hist_args)
            if len(args) == 2:  # only skipped records: still advance nothing, nothing to do
                continue
            await self._scripts[name](keys=[], args=args, client=pipe)
            names.append(name)
        if not names:
            return result
        for counts in await pipe.execute():
            applied, dups, gaps = (int(x) for x in counts)
            result.applied += applied
            result.duplicates += dups
            result.gaps += gaps
        return result
