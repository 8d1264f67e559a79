"""Read the visibility projection (Redis), for the gateway and the CLI. Async, on ``redis.asyncio``.

The projection holds one record per workflow *run* (a continue-as-new or a reset adds a run; the
old run stays listable with its closing status). ``describe(workflow_id)`` gives the latest run.
The writer is ``kadence.connectors`` (see docs/projections.md); the key layout is in
``kadence.readmodels.keys``. Each call resolves the current generation once, so reads
keep working while a rebuild switches generations.

API::

    reader = VisibilityReader(redis, namespace)
    await reader.describe(workflow_id, run_id=None) -> dict | None
    where = VisibilityFilter(workflow_type=None, status=None, start_from_ms=None, start_to_ms=None,
                             close_from_ms=None, close_to_ms=None, search=None, paused=None)
    await reader.list(where=VisibilityFilter(), *, page_size=100, cursor=None)
        -> (list[dict], str | None)
    await reader.count(where=VisibilityFilter()) -> {"total": n, "by_type": {...}, "by_status": {...}}
    await reader.positions() -> {partition: next history offset applied}
    await reader.wait_for_seq(workflow_id, run_id, seq, timeout) -> bool
    await projection_lag(redis, namespace) -> {"events", "seconds", "running", ...}

A record: ``workflow_id, run_id, workflow_type, status, paused, task_queue, start_time_ms,
close_time_ms (None while running), search_attributes (dict), parent_workflow_id,
continued_from_run_id, new_run_id (set by continue-as-new), last_seq, history_offset,
partition``. ``list`` returns newest start first. Cursors are opaque strings.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kadence.topics.errors import InvalidArgumentError, InvalidQueryError
from kadence.topics.search_attributes import from_json, index_terms, json_terms

from .keys import INVERT_MS, RUN_STATUSES, SEP, ProjectionKeys, poll_until, status_key
from .keys import text as _s

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["InvalidQueryError", "VisibilityFilter", "VisibilityReader", "projection_lag"]

_CHUNK = 500


def _search_attributes(r: dict[str, Any]) -> dict[str, Any]:
    """A record's search attributes in JSON form: its values are JSON text since index terms are
    kept (``sat``); a record written before holds plain strings."""
    sa: dict[str, Any] = json.loads(r.get("sa") or "{}") or {}
    return {k: json.loads(v) for k, v in sa.items()} if "sat" in r else sa


def _record(raw: dict[Any, Any]) -> dict[str, Any] | None:
    if not raw:
        return None
    r = {_s(k): _s(v) for k, v in raw.items()}
    if "workflow_id" not in r:
        return None

    def num(name: str) -> int | None:
        v = r.get(name)
        return int(v) if v not in (None, "") else None

    return {
        "workflow_id": r["workflow_id"],
        "run_id": r["run_id"],
        "workflow_type": r.get("type", ""),
        "status": r.get("status", ""),
        "paused": r.get("paused") == "1",
        "task_queue": r.get("task_queue", ""),
        "start_time_ms": num("start_ms"),
        "close_time_ms": num("close_ms"),
        "search_attributes": _search_attributes(r),
        "parent_workflow_id": r.get("parent") or None,
        "continued_from_run_id": r.get("cont") or None,
        "new_run_id": r.get("new_run") or None,
        "last_seq": num("last_seq") or 0,
        "history_offset": num("offset"),
        "partition": num("partition"),
    }


def _encode_cursor(member: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"m": member}).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> str:
    try:
        pad = "=" * (-len(cursor) % 4)
        member = json.loads(base64.urlsafe_b64decode(cursor + pad))["m"]
        if not isinstance(member, str) or "|" not in member:
            raise ValueError(member)
        return member
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidQueryError(f"invalid cursor {cursor[:40]!r}") from exc


def _ms_bound(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > INVERT_MS:
        raise InvalidQueryError(f"time bounds are epoch milliseconds (got {value!r})")
    return value


@dataclass(frozen=True)
class VisibilityFilter:
    """Which runs ``VisibilityReader.list`` and ``count`` select: every condition given holds
    (None: any). Time bounds are inclusive epoch milliseconds; ``search`` is attribute -> value
    (a str, an int, a float, a bool, a datetime or a list of str, all of which a keyword list must
    hold; ``{"datetime": "<ISO 8601>"}`` is a datetime), all of which must match (a keyword
    list matches a value it holds); ``paused``: only paused (True) or only unpaused (False) runs.
    A condition that cannot hold (an unknown status, a negative time) is an
    ``InvalidQueryError`` when the filter is made."""

    workflow_type: str | None = None
    status: str | None = None
    start_from_ms: int | None = None
    start_to_ms: int | None = None
    close_from_ms: int | None = None
    close_to_ms: int | None = None
    search: Mapping[str, Any] | None = None
    paused: bool | None = None

    def __post_init__(self) -> None:
        if self.status is not None and self.status not in RUN_STATUSES:
            raise InvalidQueryError(f"status must be one of {', '.join(RUN_STATUSES)} (got {self.status!r})")
        for bound in (self.start_from_ms, self.start_to_ms, self.close_from_ms, self.close_to_ms):
            _ms_bound(bound)
        search = self.search
        if search is not None and not isinstance(search, Mapping):
            raise InvalidQueryError("search is a dict of attribute names to values")
        try:
            wire = from_json(dict(search or {}))
        except InvalidArgumentError as exc:
            raise InvalidQueryError(f"search: {exc}") from None
        # attribute -> the terms a matching run's value holds (empty: none)
        terms = {k: tuple(index_terms(v)) for k, v in wire.items()}
        object.__setattr__(self, "search", terms or None)
        if self.paused is not None and not isinstance(self.paused, bool):
            raise InvalidQueryError("paused is true, false or None")

    @property
    def counted(self) -> bool:
        """Whether the counters answer ``count`` (only type and status conditions)."""
        return (
            all(v is None for v in (self.start_from_ms, self.start_to_ms, self.close_from_ms, self.close_to_ms))
            and self.paused is None
            and not self.search
        )

    def matches(self, rec: dict[str, Any]) -> bool:
        """Whether a run record (``VisibilityReader``'s) meets every condition."""
        if self.workflow_type is not None and rec["workflow_type"] != self.workflow_type:
            return False
        if self.status is not None and rec["status"] != self.status:
            return False
        if self.paused is not None and rec["paused"] != self.paused:
            return False
        if self.search:
            sa = rec["search_attributes"]
            for k, wanted in self.search.items():
                if k not in sa or not set(wanted) <= set(json_terms(sa[k])):
                    return False
        if self.close_from_ms is not None or self.close_to_ms is not None:
            c = rec["close_time_ms"]
            if (
                c is None
                or (self.close_from_ms is not None and c < self.close_from_ms)
                or (self.close_to_ms is not None and c > self.close_to_ms)
            ):
                return False
        return True


#: every run
_ALL = VisibilityFilter()


class VisibilityReader:
    """Reads one namespace's visibility projection. ``redis`` is a ``redis.asyncio.Redis``."""

    def __init__(self, redis: Redis, namespace: str):
        self.redis = redis
        self.namespace = namespace
        self.keys = ProjectionKeys(namespace, "visibility")

    async def generation(self) -> str:
        return _s(await self.redis.get(self.keys.pointer)) or "0"

    async def _prefix(self) -> str:
        return await self.keys.current_prefix(self.redis)

    async def describe(self, workflow_id: str, run_id: str | None = None) -> dict[str, Any] | None:
        """The run ``run_id`` of ``workflow_id``, or its latest run; None when unknown."""
        g = await self._prefix()
        if run_id is None:
            run_id = _s(await self.redis.get(f"{g}wf:{workflow_id}"))
            if run_id is None:
                return None
        return _record(await self.redis.hgetall(f"{g}run:{workflow_id}/{run_id}"))

    async def positions(self) -> dict[int, int]:
        """Per history partition, the next offset the projection will apply (all before it are in)."""
        return await self.keys.positions(self.redis)

    async def wait_for_seq(self, workflow_id: str, run_id: str, seq: int, timeout: float) -> bool:
        """Wait until the run's record reflects history event ``seq`` (a reply's ``history_seq``);
        False on timeout. Polls (every 10 ms, backing off to 100 ms)."""

        async def reflected() -> bool:
            g = await self._prefix()
            last = await self.redis.hget(f"{g}run:{workflow_id}/{run_id}", "last_seq")
            return last is not None and int(last) >= seq

        return await poll_until(reflected, timeout)

    # -- list / count -------------------------------------------------------------------------

    def _plan(self, g: str, where: VisibilityFilter) -> str:
        """The index to walk (the filter checks the rest on each record)."""
        search = where.search
        if where.paused and where.workflow_type is None and where.status is None and not search:
            return f"{g}i:paused"
        term = next((f"{k}{SEP}{ts[0]}" for k, ts in sorted((search or {}).items()) if ts), None)
        if term is not None:
            return f"{g}i:sa:{term}"
        if where.workflow_type is not None and where.status is not None:
            return f"{g}i:ts:{where.status}:{where.workflow_type}"
        if where.workflow_type is not None:
            return f"{g}i:type:{where.workflow_type}"
        if where.status is not None:
            return f"{g}i:status:{where.status}"
        return f"{g}i:all"

    async def _walk(
        self, where: VisibilityFilter, *, cursor: str | None, limit: int
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Yield (member, record) in list order, after ``cursor``, at most ``limit``."""
        g = await self._prefix()
        index = self._plan(g, where)
        # newest first == ascending inverted start time
        lo = "-" if where.start_to_ms is None else f"[{INVERT_MS - where.start_to_ms:013d}|"
        hi = "+" if where.start_from_ms is None else f"({INVERT_MS - where.start_from_ms + 1:013d}|"
        if cursor is not None:
            after = _decode_cursor(cursor)
            if lo == "-" or after >= lo[1:]:
                lo = "(" + after
        produced = 0
        while produced < limit:
            # what the page still needs (a filter the index does not apply may drop some: then
            # the next chunk), not a whole chunk: a run record is a round trip's worth of work
            want = min(_CHUNK, max(limit - produced, 16))
            members = [_s(m) for m in await self.redis.zrangebylex(index, lo, hi, start=0, num=want)]
            if not members:
                return
            pipe = self.redis.pipeline(transaction=False)
            for m in members:
                pipe.hgetall(f"{g}run:{m.split('|', 1)[1]}")
            raws = await pipe.execute()
            for m, raw in zip(members, raws, strict=True):
                rec = _record(raw)
                if rec is None or not where.matches(rec):
                    continue
                yield m, rec
                produced += 1
                if produced >= limit:
                    return
            if len(members) < want:
                return
            lo = "(" + members[-1]

    async def list(
        self, where: VisibilityFilter = _ALL, *, page_size: int = 100, cursor: str | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of the runs ``where`` selects, newest start first, and the cursor of the next
        page (None at the end)."""
        if not isinstance(page_size, int) or not 1 <= page_size <= 1000:
            raise InvalidQueryError("page_size must be between 1 and 1000")
        items: list[dict[str, Any]] = []
        last: str | None = None
        async for member, rec in self._walk(where, cursor=cursor, limit=page_size + 1):
            if len(items) == page_size and last is not None:  # (page_size >= 1: last is set)
                return items, _encode_cursor(last)
            items.append(rec)
            last = member
        return items, None

    async def count(self, where: VisibilityFilter = _ALL) -> dict[str, Any]:
        """``{"total": n, "by_type": {type: n}, "by_status": {status: n}}`` of the runs ``where``
        selects.

        Without time, pause or search conditions this reads the counters (one hash); otherwise
        it walks the matching index."""
        by_type: dict[str, int] = {}
        by_status: dict[str, int] = {}
        total = 0
        if where.counted:
            g = await self._prefix()
            for k, v in (await self.redis.hgetall(f"{g}counts")).items():
                st, typ = _s(k).split(SEP, 1)
                n = int(v)
                if (
                    n <= 0
                    or (where.workflow_type is not None and typ != where.workflow_type)
                    or (where.status is not None and st != where.status)
                ):
                    continue
                by_type[typ] = by_type.get(typ, 0) + n
                by_status[st] = by_status.get(st, 0) + n
                total += n
        else:
            async for _m, rec in self._walk(where, cursor=None, limit=10**12):
                by_type[rec["workflow_type"]] = by_type.get(rec["workflow_type"], 0) + 1
                by_status[rec["status"]] = by_status.get(rec["status"], 0) + 1
                total += 1
        return {"total": total, "by_type": by_type, "by_status": by_status}


async def projection_lag(redis: Redis, namespace: str, *, stale_after_s: float = 15.0) -> dict[str, Any]:
    """The live projection process's lag report, for ``/readyz`` and ``kadence projections lag``.

    ``{"running": bool, "events": n, "seconds": s, "updated_ms": t, "partitions": {p: {...}}}``:
    ``events`` is the number of history offsets not yet applied (0 when caught up), ``seconds``
    how far behind the newest applied event is when behind (0 when caught up). A report older
    than ``stale_after_s`` means the process is not running: ``running`` is False and the
    report's age is added to ``seconds``. ``running`` is False with ``events`` None when no
    projection process ever reported."""
    raw = await redis.get(status_key(namespace))
    if raw is None:
        return {"running": False, "events": None, "seconds": None, "updated_ms": None, "partitions": {}}
    report = json.loads(raw)
    age = max(0.0, time.time() - report["updated_ms"] / 1000)
    running = age <= stale_after_s
    seconds = report["seconds"] if running else report["seconds"] + age
    return {
        "running": running,
        "events": report["events"],
        "seconds": round(seconds, 3),
        "updated_ms": report["updated_ms"],
        "partitions": report.get("partitions", {}),
    }
