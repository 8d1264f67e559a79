"""A workflow task the engine sent without its events (``WorkflowTask.history_in_topic``: they
would not fit in one Kafka record, ``KADENCE_PROCESSOR_TASK_MAX_BYTES``): its events are read
from the history topic, where they were committed in the same transaction as the task."""

from __future__ import annotations

from typing import cast

from kadence.schemas.records import HistoryEvent, WorkflowTask
from kadence.topics.engine_client import EngineClient

from ._instance import WorkflowInstance

__all__ = ["with_events_from_topic"]


async def with_events_from_topic(
    engine: EngineClient, task: WorkflowTask, cached: WorkflowInstance | None
) -> WorkflowTask:
    """``task`` with the events it would have carried: up to its ``WorkflowTaskScheduled`` (a
    query: all of them); those after ``cached``'s last event when it runs this run and the
    engine did not ask for the whole history, else the whole history (``full_history``)."""
    query = task["query"] is not None
    upto = 0 if query else task["scheduled_seq"]
    events = await engine.history_through(task["workflow_id"], task["run_id"], upto)
    history = cast(list[HistoryEvent], [e for e in events if not upto or e["seq"] <= upto])
    if (
        not query
        and not task["full_history"]  # the engine's "the cached instance is unusable" stands
        and cached is not None
        and cached.info.run_id == task["run_id"]
        and cached.eager_token is None
    ):
        return {**task, "events": [e for e in history if e["seq"] > cached.last_seq], "full_history": False}
    return {**task, "events": history, "full_history": True}
