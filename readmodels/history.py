"""Read the history read model (Redis): each run's history events in order, paged by sequence
number, for the gateway and the CLI. Async, on ``redis.asyncio``.

API::

    model = HistoryReadModel(redis, namespace)
    page = await model.read(workflow_id, run_id=None, after_seq=0, limit=100) -> HistoryPage
    #   page.run_id (None: unknown workflow/run), page.events (decoded HistoryEvent dicts,
    #   seq > after_seq, oldest first), page.next_after_seq (pass as after_seq for the next page;
    #   None when the page reached the last event stored so far), page.last_seq
    await model.latest_run(workflow_id) -> str | None
    await model.positions() -> {partition: next history offset applied}
    await model.wait_for_seq(workflow_id, run_id, seq, timeout) -> bool

``after_seq`` is the cursor: events are numbered 1..n per run and never change, so a cursor
stays valid across rebuilds. The events are the same dicts ``kadence.topics.decode`` returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kadence.topics import serde
from kadence.topics.errors import InvalidQueryError

from .keys import ProjectionKeys, poll_until
from .keys import text as _s

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["HistoryPage", "HistoryReadModel"]


@dataclass(frozen=True)
class HistoryPage:
    workflow_id: str
    run_id: str | None
    events: list[Any] = field(default_factory=list)
    next_after_seq: int | None = None
    last_seq: int = 0


class HistoryReadModel:
    """Reads one namespace's history read model. ``redis`` is a ``redis.asyncio.Redis``."""

    def __init__(self, redis: Redis, namespace: str):
        self.redis = redis
        self.namespace = namespace
        self.keys = ProjectionKeys(namespace, "history")

    async def _prefix(self) -> str:
        return await self.keys.current_prefix(self.redis)

    async def latest_run(self, workflow_id: str) -> str | None:
        return _s(await self.redis.get(f"{await self._prefix()}latest:{workflow_id}"))

    async def read(
        self, workflow_id: str, run_id: str | None = None, after_seq: int = 0, limit: int = 100
    ) -> HistoryPage:
        """Events of the run (default: the latest run) with ``seq > after_seq``, at most ``limit``."""
        if not isinstance(after_seq, int) or after_seq < 0:
            raise InvalidQueryError("after_seq must be an integer >= 0")
        if not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise InvalidQueryError("limit must be between 1 and 10000")
        g = await self._prefix()
        if run_id is None:
            run_id = _s(await self.redis.get(f"{g}latest:{workflow_id}"))
            if run_id is None:
                return HistoryPage(workflow_id, None)
        key = f"{g}ev:{workflow_id}/{run_id}"
        pipe = self.redis.pipeline(transaction=False)
        pipe.llen(key)
        pipe.lrange(key, after_seq, after_seq + limit - 1)
        last_seq, raws = await pipe.execute()
        if last_seq == 0:
            return HistoryPage(workflow_id, None)
        events = [serde.decode("HistoryEvent", raw) for raw in raws]
        reached = after_seq + len(events)
        return HistoryPage(workflow_id, run_id, events, reached if reached < last_seq else None, last_seq)

    async def positions(self) -> dict[int, int]:
        """Per history partition, the next offset the read model will apply."""
        return await self.keys.positions(self.redis)

    async def wait_for_seq(self, workflow_id: str, run_id: str, seq: int, timeout: float) -> bool:
        """Wait until the run's events up to ``seq`` are readable; False on timeout."""

        async def readable() -> bool:
            g = await self._prefix()
            length: int = await self.redis.llen(f"{g}ev:{workflow_id}/{run_id}")
            return length >= seq

        return await poll_until(readable, timeout)
