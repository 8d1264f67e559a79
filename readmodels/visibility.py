"""Read the visibility projection (Redis), for the gateway and the CLI. Async, on ``redis.asyncio``.

The projection holds one record per workflow *run* (a continue-as-new or a reset adds a run; the
old run stays listable with its closing status). ``describe(workflow_id)`` gives the latest run.
The writer is ``kadence.connectors`` (see docs/projections.md); the key layout is in
``kadence.readmodels.keys``. Each call resolves the current generation once, so reads
keep working while a rebuild switches generations.

API::

    reader = VisibilityReader(redis, namespace)
    await reader.describe(workflow_id, run_id=None) -> dict | None
    await reader.list(*, workflow_type=None, status=None, start_from_ms=None, start_to_ms=None,
                      close_from_ms=None, close_to_ms=None, search=None, page_size=100,
                      cursor=None, paused=None) -> (list[dict], str | None)
    await reader.count(**same filters) -> {"total": n, "by_type": {...}, "by_status": {...}}
    await reader.positions() -> {partition: next history offset applied}
    await reader.wait_for_seq(workflow_id, run_id, seq, timeout) -> bool
    await projection_lag(redis, namespace) -> {"events", "seconds", "running", ...}

A record: ``workflow_id, run_id, workflow_type, status, paused, task_queue, start_time_ms,
close_time_ms (None while running), search_attributes (dict), parent_workflow_id,
continued_from_run_id, new_run_id (set by continue-as-new), last_seq, history_offset,
partition``. ``list`` returns newest start first; time bounds are inclusive; ``search`` is a
dict of attribute -> value, all of which must match. Cursors are opaque strings.
"""

from __future__ import annotations

import base64
import json
import time

from kadence.topics.errors import InvalidQueryError

from .keys import INVERT_MS, RUN_STATUSES, SEP, ProjectionKeys, poll_until, status_key
from .keys import text as _s

__all__ = ["InvalidQueryError", "VisibilityReader", "projection_lag"]

_CHUNK = 500


def _record(raw: dict) -> dict | None:
    if not raw:
        return None
    r = {_s(k): _s(v) for k, v in raw.items()}
    if "workflow_id" not in r:
        return None

    def num(name):
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
        "search_attributes": json.loads(r.get("sa") or "{}") or {},
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


def _ms_bound(value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > INVERT_MS:
        raise InvalidQueryError(f"time bounds are epoch milliseconds (got {value!r})")
    return value


class VisibilityReader:
    """Reads one namespace's visibility projection. ``redis`` is a ``redis.asyncio.Redis``."""

    def __init__(self, redis, namespace: str):
        self.redis = redis
        self.namespace = namespace
        self.keys = ProjectionKeys(namespace, "visibility")

    async def generation(self) -> str:
        return _s(await self.redis.get(self.keys.pointer)) or "0"

    async def _prefix(self) -> str:
        return await self.keys.current_prefix(self.redis)

    async def describe(self, workflow_id: str, run_id: str | None = None) -> dict | None:
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

    def _plan(self, g: str, workflow_type, status, search, paused=None) -> tuple[str, dict]:
        """The index to walk, and the filters left to check on each record."""
        if status is not None and status not in RUN_STATUSES:
            raise InvalidQueryError(f"status must be one of {', '.join(RUN_STATUSES)} (got {status!r})")
        if search is not None and (
            not isinstance(search, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in search.items())
        ):
            raise InvalidQueryError("search is a dict of str to str")
        if paused is not None and not isinstance(paused, bool):
            raise InvalidQueryError("paused is true, false or None")
        rest = {"type": workflow_type, "status": status, "search": dict(search or {}), "paused": paused}
        if paused and workflow_type is None and status is None and not search:
            return f"{g}i:paused", rest
        if search:
            k, v = sorted(search.items())[0]
            return f"{g}i:sa:{k}{SEP}{v}", rest
        if workflow_type is not None and status is not None:
            return f"{g}i:ts:{status}:{workflow_type}", rest
        if workflow_type is not None:
            return f"{g}i:type:{workflow_type}", rest
        if status is not None:
            return f"{g}i:status:{status}", rest
        return f"{g}i:all", rest

    async def _walk(
        self,
        *,
        workflow_type,
        status,
        start_from_ms,
        start_to_ms,
        close_from_ms,
        close_to_ms,
        search,
        cursor,
        limit,
        paused=None,
    ):
        """Yield (member, record) in list order, after ``cursor``, at most ``limit``."""
        start_from_ms, start_to_ms = _ms_bound(start_from_ms), _ms_bound(start_to_ms)
        close_from_ms, close_to_ms = _ms_bound(close_from_ms), _ms_bound(close_to_ms)
        g = await self._prefix()
        index, rest = self._plan(g, workflow_type, status, search, paused)
        # newest first == ascending inverted start time
        lo = "-" if start_to_ms is None else f"[{INVERT_MS - start_to_ms:013d}|"
        hi = "+" if start_from_ms is None else f"({INVERT_MS - start_from_ms + 1:013d}|"
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
                if rec is None or not self._match(rec, rest, close_from_ms, close_to_ms):
                    continue
                yield m, rec
                produced += 1
                if produced >= limit:
                    return
            if len(members) < want:
                return
            lo = "(" + members[-1]

    @staticmethod
    def _match(rec: dict, rest: dict, close_from_ms, close_to_ms) -> bool:
        if rest["type"] is not None and rec["workflow_type"] != rest["type"]:
            return False
        if rest["status"] is not None and rec["status"] != rest["status"]:
            return False
        if rest["paused"] is not None and rec["paused"] != rest["paused"]:
            return False
        sa = rec["search_attributes"]
        if any(sa.get(k) != v for k, v in rest["search"].items()):
            return False
        if close_from_ms is not None or close_to_ms is not None:
            c = rec["close_time_ms"]
            if (
                c is None
                or (close_from_ms is not None and c < close_from_ms)
                or (close_to_ms is not None and c > close_to_ms)
            ):
                return False
        return True

    async def list(
        self,
        *,
        workflow_type: str | None = None,
        status: str | None = None,
        start_from_ms: int | None = None,
        start_to_ms: int | None = None,
        close_from_ms: int | None = None,
        close_to_ms: int | None = None,
        search: dict | None = None,
        page_size: int = 100,
        cursor: str | None = None,
        paused: bool | None = None,
    ) -> tuple[list[dict], str | None]:
        """One page of runs, newest start first, and the cursor of the next page (None at the end)."""
        if not isinstance(page_size, int) or not 1 <= page_size <= 1000:
            raise InvalidQueryError("page_size must be between 1 and 1000")
        items: list[dict] = []
        last: str | None = None
        async for member, rec in self._walk(
            workflow_type=workflow_type,
            status=status,
            start_from_ms=start_from_ms,
            start_to_ms=start_to_ms,
            close_from_ms=close_from_ms,
            close_to_ms=close_to_ms,
            search=search,
            cursor=cursor,
            limit=page_size + 1,
            paused=paused,
        ):
            if len(items) == page_size and last is not None:  # (page_size >= 1: last is set)
                return items, _encode_cursor(last)
            items.append(rec)
            last = member
        return items, None

    async def count(
        self,
        *,
        workflow_type: str | None = None,
        status: str | None = None,
        start_from_ms: int | None = None,
        start_to_ms: int | None = None,
        close_from_ms: int | None = None,
        close_to_ms: int | None = None,
        search: dict | None = None,
        paused: bool | None = None,
    ) -> dict:
        """``{"total": n, "by_type": {type: n}, "by_status": {status: n}}`` of the matching runs.

        Without time or search filters this reads the counters (one hash); otherwise it walks
        the matching index."""
        by_type: dict[str, int] = {}
        by_status: dict[str, int] = {}
        total = 0
        simple = all(v is None for v in (start_from_ms, start_to_ms, close_from_ms, close_to_ms, paused)) and not search
        if simple:
            if status is not None and status not in RUN_STATUSES:
                raise InvalidQueryError(f"status must be one of {', '.join(RUN_STATUSES)} (got {status!r})")
            g = await self._prefix()
            for k, v in (await self.redis.hgetall(f"{g}counts")).items():
                st, typ = _s(k).split(SEP, 1)
                n = int(v)
                if (
                    n <= 0
                    or (workflow_type is not None and typ != workflow_type)
                    or (status is not None and st != status)
                ):
                    continue
                by_type[typ] = by_type.get(typ, 0) + n
                by_status[st] = by_status.get(st, 0) + n
                total += n
        else:
            async for _m, rec in self._walk(
                workflow_type=workflow_type,
                status=status,
                start_from_ms=start_from_ms,
                start_to_ms=start_to_ms,
                close_from_ms=close_from_ms,
                close_to_ms=close_to_ms,
                search=search,
                cursor=None,
                limit=10**12,
                paused=paused,
            ):
                by_type[rec["workflow_type"]] = by_type.get(rec["workflow_type"], 0) + 1
                by_status[rec["status"]] = by_status.get(rec["status"], 0) + 1
                total += 1
        return {"total": total, "by_type": by_type, "by_status": by_status}


async def projection_lag(redis, namespace: str, *, stale_after_s: float = 15.0) -> dict:
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
