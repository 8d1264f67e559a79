"""Workflow streams (decision 0062): what workflow code and activity attempts publish, written to
``{ns}.streams`` in the transaction that accepts it, keyed by the workflow ID.

A value of workflow code rides on its workflow task's completion (``PublishToStream``): it is
recorded as a ``StreamRecordPublished`` event (the stream's name only: the value is on the stream
topic, not in the history) so that a replay of the code matches it and publishes nothing again.
An activity attempt's values ride on its completion (``RespondActivityTaskCompleted.published``)
and are written only if the engine accepts that completion: a failed, timed-out or duplicate
attempt's values never reach a ``read_committed`` reader. A workflow that published anything ends
its streams with one ``end`` record when it closes for good (not at a continue-as-new, a cron
run's next run or a reset, which go on with the same streams)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kadence.schemas.records import StreamRecord, WorkflowState

from .effects import Transition, emit

__all__ = ["end_streams", "publish_from_activity", "publish_from_workflow"]


def _record(t: Transition, st: WorkflowState, stream: str, value: bytes | None, seq: int, **extra: Any) -> None:
    rec: StreamRecord = {
        "workflow_id": st["workflow_id"],
        "run_id": st["run_id"],
        "stream": stream,
        "value": value,
        "activity_id": None,
        "attempt": 0,
        "history_seq": seq,
        "timestamp_ms": t.ts,
        "end": False,
    }
    rec.update(extra)  # type: ignore[typeddict-item]
    t.out.streams.append(rec)
    st["streams_used"] = True


def publish_from_workflow(t: Transition, st: WorkflowState, stream: str, value: bytes) -> None:
    """A ``PublishToStream`` command of a completed workflow task."""
    ev = emit(t, st, "StreamRecordPublished", {"stream": stream})
    _record(t, st, stream, value, ev["seq"])


def publish_from_activity(
    t: Transition, st: WorkflowState, published: Iterable[Any], activity_id: str, attempt: int, seq: int
) -> None:
    """What an accepted attempt published (``seq``: its ``ActivityTaskCompleted`` event)."""
    for item in published:
        _record(t, st, item["stream"], item["value"], seq, activity_id=activity_id, attempt=attempt)


def end_streams(t: Transition, st: WorkflowState) -> None:
    """The workflow closed for good: readers of any of its streams stop after this record."""
    if st.get("streams_used"):
        _record(t, st, "", None, st["next_seq"] - 1, end=True)
