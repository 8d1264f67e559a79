"""Redis key layout of the projections (visibility, history read model), shared by the writer
(``kadence.connectors``) and the readers (``kadence.readmodels.visibility``, ``.history``).

Every key of a namespace starts with ``kadence:{ns}:``. Each projection keeps its data under a
*generation* prefix and one pointer key names the generation readers use::

    kadence:{ns}:{projection}:gen          current generation (integer; missing = 0)
    kadence:{ns}:{projection}:genseq       last generation number handed out (INCR)
    kadence:{ns}:{projection}:building     generation a rebuild is filling (absent otherwise)
    kadence:{ns}:{projection}:rebuild-lock one rebuild at a time (SET NX with a TTL)
    kadence:{ns}:{projection}:g{N}:...     the data of generation N
    kadence:{ns}:projections:status        lag report of the live projection process (JSON)

Visibility, under ``G = kadence:{ns}:visibility:g{N}:`` (``id`` = ``{workflow_id}/{run_id}``)::

    G run:{id}              hash: one run (type, status, times, search attributes, last seq ...)
    G wf:{workflow_id}      string: run ID of the workflow's latest started run
    G i:all                 index of every run            } sorted sets, all scores 0,
    G i:type:{type}         index by workflow type        } members "{13-digit inverted
    G i:status:{status}     index by status               } start ms}|{id}": lexicographic
    G i:ts:{status}:{type}  index by status and type      } order is newest start first
    G i:sa:{key}\\x1f{value} index by search attribute    }
    G i:close               closed runs, member "{inverted close ms}|{id}"
    G counts                hash "{status}\\x1f{type}" -> number of runs
    G pos                   hash partition -> next history offset to apply

History read model, under ``H = kadence:{ns}:history:g{N}:``::

    H ev:{id}               list: the run's history events (Avro wire bytes), index = seq - 1
    H latest:{workflow_id}  string: run ID of the workflow's latest started run
    H pos                   hash partition -> next history offset to apply
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = [
    "INVERT_MS",
    "PROJECTIONS",
    "RUN_STATUSES",
    "STATUS_KEY",
    "ProjectionKeys",
    "index_member",
    "poll_until",
    "status_key",
    "text",
]

#: the projections the Faust app maintains (names accepted by `kadence projections rebuild`)
PROJECTIONS = ("visibility", "history")
#: statuses a visibility record can have
RUN_STATUSES = ("running", "completed", "failed", "canceled", "terminated", "continued_as_new", "timed_out")
#: index members sort by ``INVERT_MS - ms`` (13 digits), so lexicographic order is newest first
INVERT_MS = 9_999_999_999_999
STATUS_KEY = "projections:status"
SEP = "\x1f"


def status_key(namespace: str) -> str:
    return f"kadence:{namespace}:{STATUS_KEY}"


def index_member(ms: int, member_id: str) -> str:
    return f"{INVERT_MS - int(ms):013d}|{member_id}"


@overload
def text(value: None) -> None: ...
@overload
def text(value: bytes | str) -> str: ...
def text(value: bytes | str | None) -> str | None:
    """A Redis reply as text (clients may or may not decode responses)."""
    return value.decode() if isinstance(value, bytes) else value


async def poll_until(check: Callable[[], Awaitable[bool]], timeout: float) -> bool:
    """Await ``check()`` every 10 ms, backing off to 100 ms, until it is true (True) or
    ``timeout`` seconds passed (False): how readers wait for a projection to catch up."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        if await check():
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        await asyncio.sleep(min(delay, left))
        delay = min(delay * 2, 0.1)


class ProjectionKeys:
    """Key names of one projection of one namespace."""

    def __init__(self, namespace: str, projection: str):
        if projection not in PROJECTIONS:
            raise ValueError(f"unknown projection {projection!r} (known: {', '.join(PROJECTIONS)})")
        self.namespace, self.projection = namespace, projection
        self.base = f"kadence:{namespace}:{projection}"
        self.pointer = f"{self.base}:gen"
        self.genseq = f"{self.base}:genseq"
        self.building = f"{self.base}:building"
        self.lock = f"{self.base}:rebuild-lock"

    def prefix(self, generation: int | str) -> str:
        return f"{self.base}:g{generation}:"

    async def current_prefix(self, redis: Redis) -> str:
        """The key prefix of the generation readers use now (resolved per call: a rebuild's
        switch is atomic for readers)."""
        return self.prefix(text(await redis.get(self.pointer)) or "0")

    async def positions(self, redis: Redis) -> dict[int, int]:
        """Per history partition, the next offset the projection will apply (all before it are in)."""
        g = await self.current_prefix(redis)
        return {int(text(k)): int(text(v)) for k, v in (await redis.hgetall(f"{g}pos")).items()}

    def pattern(self, generation: int | str) -> str:
        """SCAN pattern of every key of a generation (glob characters in the namespace are
        impossible: namespaces match ``[a-z][a-z0-9_-]*``)."""
        return f"{self.base}:g{generation}:*"
