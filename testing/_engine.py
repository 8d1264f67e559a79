"""The engine of ``kadence.testing``: the real state machine in this process, on a virtual clock.

It serves what ``kadence.Client`` asks of an engine (``request``, ``history``, ``close``) the way
the history processor, the timer service and the processor's deadline index do on Kafka, with
none of their transport: every command goes through ``processors.state_machine.transition``
against an in-memory shard store, one command at a time, and what the transition emits (history
events, tasks, replies, timers, commands for other workflows) is kept here. Every record crosses
the Avro codecs on its way, as it would cross Kafka, so a payload the wire cannot carry fails here
too.

The clock is real time plus an offset that only grows: ``skip_to`` moves it ahead (time skipping).
Timers and activity deadlines fire when the clock passes them.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from kadence.processors.deadlines import DeadlineIndex
from kadence.processors.effects import BatchView, Outbox, count_history_bytes
from kadence.processors.state_machine import transition
from kadence.processors.store import MemoryShardStore
from kadence.schemas.records import ConcurrencyState
from kadence.topics import serde
from kadence.topics.concurrency_reader import limit_view
from kadence.topics.config import KafkaConfig
from kadence.topics.errors import ActivityAttemptLimitError, WorkflowNotFoundError, WorkflowTaskFailedError
from kadence.topics.records import command, new_id
from kadence.topics.streams import StreamEntry
from kadence.topics.streams import entry_from_record as _entry

__all__ = ["InMemoryEngine", "VirtualClock"]

log = logging.getLogger(__name__)


class VirtualClock:
    """Milliseconds since the epoch: real time plus what was skipped."""

    def __init__(self) -> None:
        self.skipped_ms = 0

    def now_ms(self) -> int:
        return int(time.time() * 1000) + self.skipped_ms

    def skip_to(self, at_ms: int) -> None:
        self.skipped_ms += max(0, at_ms - self.now_ms())


class InMemoryEngine:
    """One namespace's engine in this process (one shard), with ``EngineClient``'s interface
    (``send``, ``wait``, ``abandon``, ``request``, ``history``, ``read_limits``, ``close``) for
    ``kadence.Client``.
    Not thread-safe: call it from the event loop's thread (activities heartbeat through
    ``loop.call_soon_threadsafe``)."""

    def __init__(self, namespace: str = "test") -> None:
        self.config = KafkaConfig(bootstrap="in-memory", namespace=namespace, client_id="kadence-testing")
        self.clock = VirtualClock()
        self.store = MemoryShardStore(0)
        #: concurrency limits by key (one shard owns them all here)
        self.limits: dict[str, ConcurrencyState] = {}
        self.deadlines = DeadlineIndex()
        #: (fire_at_ms, n, timer record): the delay topics
        self._timers: list[tuple[int, int, dict[str, Any]]] = []
        self._n = itertools.count()
        #: ("workflow" | "activity", task queue, task record), in the order the engine emitted them
        self.tasks: deque[Any] = deque()
        #: commands not applied yet
        self._inbox: deque[Any] = deque()
        #: (workflow_id, run_id) -> history events, in seq order
        self._history: dict[tuple[str, str], list[dict[str, Any]]] = {}
        #: request_id -> (workflow_id, body_type, future or callback) of a request that waits for its reply
        self._waiting: dict[str, tuple[str, str, asyncio.Future[Any] | Callable[[dict[str, Any]], None]]] = {}
        #: workflow_id -> why its workflow tasks are no longer run (``WorkflowTaskFailedError``)
        self.broken: dict[str, WorkflowTaskFailedError | ActivityAttemptLimitError] = {}
        #: requests for a workflow's result when it closes (``AwaitWorkflowResult`` with wait)
        self._awaits_close: set[str] = set()
        #: how many of those are awaited now: while any is, time may be skipped
        self.result_waiters = 0
        self.wake = asyncio.Event()
        #: what {ns}.streams would hold (one partition: an entry's offset is its index)
        self.streams: list[StreamEntry] = []
        self._stream_written = asyncio.Event()

    # -- what Client calls -----------------------------------------------------------------------

    def send(
        self,
        workflow_id: str,
        body_type: str,
        body: dict[str, Any],
        *,
        request_id: str,
        run_id: str | None = None,
        expect_reply: bool = True,
        event_id: str | None = None,
        deferred: bool = False,
    ) -> asyncio.Future[Any]:
        """Queue a command; the future resolves with its reply (``EngineClient.send``'s contract;
        ``deferred``: only await the reply, the command rides on one already queued)."""
        fut = asyncio.get_running_loop().create_future()
        if not expect_reply:
            fut.set_result(None)
        if body_type == "AwaitWorkflowResult" and body.get("wait", True):
            self._awaits_close.add(request_id)
        if deferred:
            self._waiting[request_id] = (workflow_id, body_type, fut)
            return fut
        self.submit(
            workflow_id,
            body_type,
            body,
            request_id=request_id,
            run_id=run_id,
            on_reply=fut if expect_reply else None,
            event_id=event_id,
        )
        return fut

    async def wait(
        self, workflow_id: str, body_type: str, request_id: str, fut: asyncio.Future[Any], timeout: float | None
    ) -> dict[str, Any]:
        """The reply ``fut`` resolves with, within ``timeout`` seconds of real time. While it waits
        for a workflow's result, the clock may skip ahead."""
        waits_for_close = request_id in self._awaits_close and not fut.done()
        if waits_for_close and workflow_id in self.broken:
            self.abandon(workflow_id, request_id)
            raise self.broken[workflow_id]
        self.result_waiters += waits_for_close
        self.wake.set()
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            self.result_waiters -= waits_for_close
            self.abandon(workflow_id, request_id)

    def abandon(self, workflow_id: str, request_id: str) -> None:
        self._waiting.pop(request_id, None)
        self._awaits_close.discard(request_id)

    async def read_limits(self, keys: list[str]) -> list[dict[str, Any]]:
        """The limits of ``keys`` as ``kadence limits`` shows them (``EngineClient.read_limits``)."""
        wanted = set(keys)
        now = self.clock.now_ms()
        return [limit_view(cs, now) for cs in self.limits.values() if f"{cs['name']}={cs['value']}" in wanted]

    async def request(
        self,
        workflow_id: str,
        body_type: str,
        body: dict[str, Any],
        *,
        request_id: str,
        run_id: str | None = None,
        timeout: float | None = 30.0,
    ) -> dict[str, Any]:
        """Apply a command and wait for its reply (``EngineClient.request``'s contract)."""
        fut = self.send(workflow_id, body_type, body, request_id=request_id, run_id=run_id)
        return await self.wait(workflow_id, body_type, request_id, fut, timeout)

    async def history(self, workflow_id: str, run_id: str | None = None) -> tuple[str, list[dict[str, Any]]]:
        if run_id is None:
            reply = await self.request(workflow_id, "AwaitWorkflowResult", {"wait": False}, request_id=new_id())
            if reply["status"] == "not_found":
                raise WorkflowNotFoundError(f"workflow {workflow_id!r} not found", workflow_id=workflow_id)
            run_id = reply["run_id"]
        return self.history_of(workflow_id, run_id)

    def history_of(self, workflow_id: str, run_id: str) -> tuple[str, list[dict[str, Any]]]:
        """A run's history (what the history topic holds for it)."""
        return run_id, list(self._history.get((workflow_id, run_id), []))

    def close(self) -> None:
        for _wf, _body_type, waiter in list(self._waiting.values()):
            if isinstance(waiter, asyncio.Future) and not waiter.done():
                waiter.cancel()
        self._waiting.clear()

    # -- the engine's inputs ---------------------------------------------------------------------

    def submit(
        self,
        workflow_id: str,
        body_type: str,
        body: dict[str, Any],
        *,
        request_id: str | None = None,
        run_id: str | None = None,
        on_reply: asyncio.Future[Any] | Callable[[dict[str, Any]], None] | None = None,
        event_id: str | None = None,
    ) -> None:
        """Queue a command (applied by ``step``); ``on_reply`` gets its reply."""
        request_id = request_id or new_id()
        if on_reply is not None:
            self._waiting[request_id] = (workflow_id, body_type, on_reply)
        cmd = command(workflow_id, body_type, body, request_id=request_id, run_id=run_id, event_id=event_id)
        cmd["timestamp_ms"] = self.clock.now_ms()
        self._inbox.append(cmd)
        self.wake.set()

    def reply(self, reply: dict[str, Any]) -> None:
        """A reply that does not come from a transition (a worker's answer to a query)."""
        self._deliver(serde.decode("Reply", serde.encode("Reply", reply)))

    def mark_broken(self, error: WorkflowTaskFailedError | ActivityAttemptLimitError) -> None:
        """Stop waiting for a workflow whose code failed: its result waiters get ``error``."""
        self.broken[error.workflow_id] = error
        for request_id, (wf, body_type, waiter) in list(self._waiting.items()):
            if wf == error.workflow_id and body_type == "AwaitWorkflowResult" and isinstance(waiter, asyncio.Future):
                del self._waiting[request_id]
                if not waiter.done():
                    waiter.set_exception(error)

    # -- running ---------------------------------------------------------------------------------

    def pending_commands(self) -> bool:
        return bool(self._inbox)

    def step(self) -> bool:
        """Apply one queued command; False when none was queued."""
        if not self._inbox:
            return False
        self._apply(self._inbox.popleft())
        return True

    def next_due_ms(self) -> int | None:
        """When the next timer or activity deadline fires (ms since the epoch), or None."""
        due = [d for d in (self._timers[0][0] if self._timers else None, self.deadlines.next_due_ms()) if d is not None]
        return min(due) if due else None

    def fire_due(self) -> int:
        """Fire every timer and deadline the clock has passed, in fire order; how many."""
        now, fired = self.clock.now_ms(), 0
        while self._timers and self._timers[0][0] <= now:
            _at, _n, t = heapq.heappop(self._timers)
            self._apply(self._timer_command(t["workflow_id"], t["run_id"], t))
            fired += 1
        due = self.deadlines.due(now, 10_000)
        for wf, run_id, body in sorted(due, key=lambda d: d[2]["fire_at_ms"]):
            self._apply(self._timer_command(wf, run_id, body))
        self.deadlines.settle(due, True, self.store.get_state)
        return fired + len(due)

    @staticmethod
    def _timer_command(workflow_id: str, run_id: str, t: dict[str, Any]) -> dict[str, Any]:
        body = {k: t[k] for k in ("timer_id", "fire_at_ms", "kind", "scheduled_seq", "attempt")}
        return command(workflow_id, "FireTimer", body, run_id=run_id)

    def _apply(self, cmd: dict[str, Any]) -> None:
        cmd = serde.decode("Command", serde.encode("Command", cmd))  # as the processor reads it
        view, out = BatchView(self.store, limits=self.limits), Outbox()
        try:
            transition(cmd, view, out, self.clock.now_ms())
        except Exception as exc:
            # the processor dead-letters such a command; here its sender hears of it
            waiter = self._waiting.pop(cmd["request_id"] or "", None)
            if waiter is not None and isinstance(waiter[2], asyncio.Future) and not waiter[2].done():
                waiter[2].set_exception(exc)
                return
            raise
        encoded = [(wf, ev, serde.encode("HistoryEvent", ev)) for wf, ev in out.events]
        for wf, ev, raw in encoded:  # counted as the processor counts them, before the state is kept
            count_history_bytes(view.states.get(wf), ev, len(raw))
        view.commit_into(self.store)
        for wf, _ev, raw in encoded:
            ev = serde.decode("HistoryEvent", raw)
            self._history.setdefault((wf, ev["run_id"]), []).append(ev)
        for kind, queue, task in out.tasks:
            kind = "activity" if kind == "eager" else kind  # no worker here asks for eager activities
            record = "WorkflowTask" if kind == "workflow" else "ActivityTask"
            self.tasks.append((kind, queue, serde.decode(record, serde.encode(record, task))))
        for timer in out.timers:
            timer = serde.decode("TimerRecord", serde.encode("TimerRecord", timer))
            heapq.heappush(self._timers, (timer["fire_at_ms"], next(self._n), timer))
        for wf, body_type, body, run_id, request_id, _trace in out.commands:
            self._inbox.append(command(wf, body_type, body, run_id=run_id, request_id=request_id))
        for wf in view.states:
            self.deadlines.update(wf, self.store.get_state(wf))
        for reply in out.replies:
            self._deliver(serde.decode("Reply", serde.encode("Reply", reply)))
        for rec in out.streams:
            rec = serde.decode("StreamRecord", serde.encode("StreamRecord", rec))
            self.streams.append(_entry(len(self.streams), rec))
        if out.streams:
            self._stream_written.set()
            self._stream_written = asyncio.Event()

    def follow_stream(
        self,
        workflow_id: str,
        *,
        stream: str | None,
        after: int | None = None,
        since_ms: int | None = None,
        accept: Callable[[StreamEntry], bool] = lambda _e: True,
    ) -> AsyncIterator[StreamEntry]:
        """``EngineClient.follow_stream`` on the entries in memory (``since_ms``: from the first)."""

        async def follow() -> AsyncIterator[StreamEntry]:
            position = 0 if after is None else after + 1
            while True:
                while position < len(self.streams):
                    entry = self.streams[position]
                    position += 1
                    if entry.workflow_id != workflow_id:
                        continue
                    if entry.end:
                        yield entry
                        return
                    if (stream is None or entry.stream == stream) and accept(entry):
                        yield entry
                await self._stream_written.wait()

        return follow()

    def _deliver(self, reply: dict[str, Any]) -> None:
        waiter = self._waiting.pop(reply["request_id"], None)
        if waiter is None:
            return  # nobody waits (a fire-and-forget command, or a duplicate answer)
        target = waiter[2]
        if isinstance(target, asyncio.Future):
            if not target.done():
                target.set_result(reply)
        else:
            target(reply)
