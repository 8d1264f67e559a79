"""How a replayed workflow's commands match its history (``_instance.WorkflowInstance``): the
event each command is recorded as, the fields that must agree, the events that resolve what the
code waits for, and how a command or event is named in a non-determinism error."""

from __future__ import annotations

from typing import Any

__all__ = ["IDENTITY", "MATCHING_EVENT", "RESOLUTIONS", "describe_command"]


def describe_command(kind: str, attrs: dict[str, Any]) -> str:
    if kind in ("ScheduleActivityTask", "ActivityTaskScheduled"):
        return f"{kind}(activity_type={attrs['activity_type']!r}, activity_id={attrs['activity_id']!r})"
    if kind in ("StartTimer", "TimerStarted", "CancelTimer", "TimerCanceled"):
        return f"{kind}(timer_id={attrs['timer_id']!r})"
    if kind in ("RecordMarker", "MarkerRecorded"):
        return f"{kind}(name={attrs['name']!r})"
    if kind in ("PublishToStream", "StreamRecordPublished"):
        return f"{kind}(stream={attrs['stream']!r})"
    if kind in ("CompleteWorkflowUpdate", "WorkflowUpdateCompleted"):
        return f"{kind}(update_id={attrs['update_id']!r})"
    return kind


#: the event a workflow task's command is recorded as
MATCHING_EVENT = {
    "ScheduleActivityTask": "ActivityTaskScheduled",
    "CompleteWorkflowExecution": "WorkflowExecutionCompleted",
    "FailWorkflowExecution": "WorkflowExecutionFailed",
    "StartTimer": "TimerStarted",
    "CancelTimer": "TimerCanceled",
    "RequestCancelActivityTask": "ActivityTaskCancelRequested",
    "CancelWorkflowExecution": "WorkflowExecutionCanceled",
    "ContinueAsNewWorkflowExecution": "WorkflowExecutionContinuedAsNew",
    "RecordMarker": "MarkerRecorded",
    "UpsertSearchAttributes": "SearchAttributesUpserted",
    "StartChildWorkflowExecution": "StartChildWorkflowExecutionInitiated",
    "RequestCancelExternalWorkflowExecution": "RequestCancelExternalInitiated",
    "CompleteWorkflowUpdate": "WorkflowUpdateCompleted",
    "PublishToStream": "StreamRecordPublished",
}
#: fields that must be equal between a command and its recorded event
IDENTITY = {
    "ActivityTaskScheduled": ("activity_type", "activity_id"),
    "TimerStarted": ("timer_id",),
    "TimerCanceled": ("timer_id",),
    "ActivityTaskCancelRequested": ("activity_id",),
    "MarkerRecorded": ("name",),
    "StartChildWorkflowExecutionInitiated": ("workflow_id", "workflow_type"),
    "RequestCancelExternalInitiated": ("workflow_id",),
    "WorkflowUpdateCompleted": ("update_id",),
    "StreamRecordPublished": ("stream",),
}
#: events that resolve what the code waits for (an activity's result, a timer, a signal...)
RESOLUTIONS = frozenset(
    {
        "WorkflowExecutionStarted",
        "ActivityTaskCompleted",
        "ActivityTaskFailed",
        "ActivityTaskTimedOut",
        "ActivityTaskCanceled",
        "TimerFired",
        "WorkflowSignaled",
        "WorkflowCancelRequested",
        "ChildWorkflowExecutionStarted",
        "StartChildWorkflowExecutionFailed",
        "ChildWorkflowExecutionCompleted",
        "ChildWorkflowExecutionFailed",
        "WorkflowUpdateAccepted",
        "WorkflowStartDebounced",
    }
)
