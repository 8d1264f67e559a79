"""Eager activities (decision 0054): a worker runs an activity its own workflow task scheduled
as soon as the engine has recorded the scheduling, without the activity-task topic.

When a workflow task the worker completes (an ordinary one, or the eager workflow task that
rides on an activity's result, decision 0031) schedules an activity the worker itself can run
(on its task queue, registered here, with a start-to-close or heartbeat timeout of at most
``EAGER_MAX_RECOVERY_MS``) and it has a free activity slot, the command says so (``request_eager_execution``). The processor records
the scheduling as always and, in the same transaction, puts the attempt in its reply to the
completion instead of on the activity-task topic. The worker runs it when the reply arrives and
reports the result with a plain (idempotent) produce: there is no consumed offset to commit
with it, which is what made the result a transaction of its own (decision 0032). Per activity
that saves the worker's transaction and the task topic's round trip.

What can go wrong costs a timeout, never a second business effect: a worker that dies (or shuts
down) while an eager attempt runs, or whose result is lost, leaves the attempt to its
start-to-close (or heartbeat) timeout, after which the processor dispatches the next attempt
through the topic, as for any attempt whose worker died. A reply that never comes (the
completion was lost) frees the slots it held after ``REPLY_WAIT_S``.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable, Mapping
from typing import Any

from kadence.schemas.records import ActivityTask
from kadence.topics.engine_client import EngineClient

from ._slots import Slots

__all__ = ["EAGER_MAX_RECOVERY_MS", "REPLY_LATE_S", "REPLY_WAIT_S", "EagerActivities"]

log = logging.getLogger(__name__)

#: an activity is asked for only if a lost attempt is retried within this (its heartbeat or
#: start-to-close timeout): an attempt from the topic is redelivered at the next rebalance when
#: its worker dies, an eager one waits for that timeout, and a long activity gains nothing
#: worth that wait from the few milliseconds eager dispatch saves
EAGER_MAX_RECOVERY_MS = 60_000

#: how long a completion that asked for eager activities holds their slots waiting for the
#: engine's reply; it goes on listening ``REPLY_LATE_S`` more (a processor slowed by a failover)
REPLY_WAIT_S = 30.0
REPLY_LATE_S = 600.0


class EagerActivities:
    """One worker's eager activities: which scheduled activities to ask for, and the replies."""

    def __init__(
        self,
        *,
        engine: EngineClient,
        task_queue: str,
        activities: Mapping[str, Any],
        slots: Slots,
        start: Callable[[ActivityTask], None],
        stats: collections.Counter[str],
        enabled: bool,
    ) -> None:
        self._engine = engine
        self._task_queue = task_queue
        self._activities = activities
        #: the worker's activity slots: one taken per activity asked for, given back when the
        #: engine did not send it or when its attempt ends (``done``)
        self._slots = slots
        self._start = start
        self.enabled = enabled and bool(activities)
        self._waits: set[asyncio.Task[Any]] = set()
        #: the worker's counters: eager activities asked for, received, and declined by the engine
        self._stats = stats
        #: whether an activity type is paced by the queue's rate limits (set once the worker has
        #: read them, ``_rate_limit``): such an activity is never asked for, since an eager
        #: attempt does not pass the consumer that paces them
        self.paced: Callable[[str], bool] = lambda _type: False

    def ask(self, workflow_id: str, request_id: str, commands: list[Any]) -> list[Any]:
        """``commands`` of the completion ``request_id``, with ``request_eager_execution`` set on
        each activity this worker can run now (one free slot each); when it asked for any, the
        reply to the completion (about to be produced) is awaited in the background and the
        activities it carries are started."""
        if not self.enabled:
            return commands
        wanted = sum(1 for ctype, c in commands if ctype == "ScheduleActivityTask" and self._runs_here(c))
        free = self._slots.take(wanted) if wanted else 0
        if not free:
            return commands
        out, asked = [], 0
        for ctype, c in commands:
            if ctype == "ScheduleActivityTask" and asked < free and self._runs_here(c):
                c = {**c, "request_eager_execution": True}
                asked += 1
            out.append((ctype, c))
        try:
            fut = self._engine.expect_reply(workflow_id, request_id)
        except Exception as exc:  # noqa: BLE001 - the reply consumer could not start: ask for nothing
            self._slots.give_back(free)
            log.warning("workflow %s: eager activities not asked for: %s", workflow_id, exc)
            return commands
        self._stats["eager_activities_asked"] += asked
        held = [asked]  # the slots this ask still holds (given back however the wait ends)
        t = asyncio.get_running_loop().create_task(self._receive(workflow_id, request_id, fut, held))
        self._waits.add(t)
        t.add_done_callback(self._waits.discard)
        t.add_done_callback(lambda _t: self._slots.give_back(held[0]))
        return out

    async def start(self) -> None:
        """Start reading replies now (the worker starts), not at the first completion that asks."""
        if not self.enabled:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(None, self._engine.ensure_replies)
        except Exception as exc:  # noqa: BLE001 - the first completion that asks tries again
            log.warning("the reply consumer for eager activities did not start: %s", exc)

    def _runs_here(self, c: Mapping[str, Any]) -> bool:
        opts = c["options"]
        timeouts = [t for t in (opts.get("start_to_close_timeout_ms"), opts.get("heartbeat_timeout_ms")) if t]
        return bool(
            opts["task_queue"] == self._task_queue
            and c["activity_type"] in self._activities
            and not self.paced(c["activity_type"])
            and timeouts
            and min(timeouts) <= EAGER_MAX_RECOVERY_MS
        )

    async def _receive(self, workflow_id: str, request_id: str, fut: Any, held: list[int]) -> None:
        asked = held[0]
        reply_fut = asyncio.wrap_future(fut)
        late = False
        try:
            try:
                reply = await asyncio.wait_for(asyncio.shield(reply_fut), REPLY_WAIT_S)
            except TimeoutError:
                # a slow engine (a failover) may still answer: the slots go back now, and an
                # attempt that comes later runs only in a slot free then (else its timeout retries it)
                self._slots.give_back(held[0])
                held[0], late = 0, True
                log.warning(
                    "workflow %s: no reply to a completion that asked for %d eager activities within %.0f s; "
                    "their slots are free again",
                    workflow_id,
                    asked,
                    REPLY_WAIT_S,
                )
                reply = await asyncio.wait_for(reply_fut, REPLY_LATE_S)
        except TimeoutError:
            self._engine.abandon(workflow_id, request_id)
            return
        except Exception as exc:  # noqa: BLE001 - the client closed under it
            log.debug("workflow %s: waiting for eager activities ended: %s", workflow_id, exc)
            return
        tasks: list[ActivityTask] = reply.get("activity_tasks") or []
        if late:
            tasks = [task for task in tasks if self._slots.take(1)]
        else:  # the slots of what the engine did not send go back now
            self._slots.give_back(held[0] - len(tasks))
        held[0] = 0  # each started attempt holds its slot until it ends (``done``)
        self._stats["eager_activities"] += len(tasks)
        self._stats["eager_activities_declined"] += asked - len(tasks)
        for task in tasks:
            self._start(task)

    def done(self) -> None:
        """An eager attempt ended (reported or not): its slot is free."""
        self._slots.give_back()

    async def close(self) -> None:
        """Ask for no more, and stop waiting for replies (the worker is shutting down: an
        attempt the engine sent meanwhile is retried after its timeout)."""
        self.enabled = False
        for t in list(self._waits):
            t.cancel()
        if self._waits:
            await asyncio.gather(*self._waits, return_exceptions=True)
