"""Queries and update validations a worker answers (``QueryTasks``): from the cached instance or
a throw-away replay (``kadence._queries``), or, for a closed run whose task comes without events,
from its history read from the topic. Nothing is written to history; an accepted update is sent
to the engine to be recorded, a query's answer is produced to the replies topic."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, cast

from confluent_kafka import Message

from kadence.schemas.records import HistoryEvent, WorkflowTask

from ._queries import answer

if TYPE_CHECKING:
    from ._worker import Worker

__all__ = ["QueryTasks"]


class QueryTasks:
    """The query tasks of one worker."""

    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        #: queries of closed runs waiting for their history
        self._closed_queries: set[asyncio.Task[Any]] = set()

    def take(self, task: WorkflowTask, msg: Message) -> None:
        """Answer a query task (a closed run's after reading its history)."""
        if task["events"]:
            self.answer(task, msg)
        else:  # a closed run: the engine keeps no history for it, read it from the topic
            t = asyncio.get_running_loop().create_task(self._closed(task, msg))
            self._closed_queries.add(t)
            t.add_done_callback(self._closed_queries.discard)

    async def _closed(self, task: WorkflowTask, msg: Message) -> None:
        """A query of a closed run (the engine sends no events for it): answered from a replay
        of the run's history, read from the history topic, i.e. from its final state."""
        w = self._worker
        try:
            _run, events = await w.client.engine.history(task["workflow_id"], task["run_id"])
        except Exception as exc:  # noqa: BLE001 - the caller gets the error
            self.answer(task, msg, unreadable=exc)
            return
        self.answer({**task, "events": cast(list[HistoryEvent], events)}, msg)

    def answer(self, task: WorkflowTask, msg: Message, *, unreadable: BaseException | None = None) -> None:
        """Answer a query, or validate an update, from the cached instance or a throw-away replay
        (``kadence._queries``). Nothing is written to history; an accepted update is sent to
        the engine to be recorded. ``unreadable``: why a closed run's history could not be read."""
        w = self._worker
        wf = task["workflow_id"]
        reply, accept = answer(
            task,
            w._workflows.get(task["workflow_type"]),
            w._cache.get(wf),
            w.client.converter,
            unreadable=unreadable,
            interceptors=w.interceptors,
            failure_types=w._failure_types,
        )
        if accept is not None:
            accepted_query = task["query"]
            assert accepted_query is not None, "an accepted update came in a query task"
            w.stats["updates_accepted"] += 1
            w._send(
                task,
                "AcceptWorkflowUpdate",
                {**accept, "identity": w.identity},
                msg,
                w._live_wt_consumer,
                request_id=accepted_query["request_id"],
            )
            return
        assert reply is not None, "answer() gives a reply when it gives no acceptance"
        w.stats["queries"] += 1
        w.metrics.queries.inc()
        engine = w.client.engine
        engine.produce_raw(
            engine.topics.replies,
            reply["request_id"].encode(),
            engine.reply_codec.encode(reply),
            lambda err, _m: w._live_wt_consumer.done(msg),
        )
