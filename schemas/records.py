"""The records that cross Kafka, as ``TypedDict`` definitions: GENERATED from the schemas by
``python -m kadence.schemas types`` (``kadence.schemas.typegen``). Do not edit by hand.

The annotations are evaluated (no ``from __future__ import annotations``), so each type's
``__required_keys__`` and ``__optional_keys__`` are right at run time; a record is defined
before the records that use it."""

from typing import Literal, NotRequired, Protocol, TypedDict, TypeVar, overload

__all__ = [
    "AcceptWorkflowUpdate",
    "ActivityDescription",
    "ActivityOptions",
    "ActivityTask",
    "ActivityTaskAttemptFailed",
    "ActivityTaskCancelRequested",
    "ActivityTaskCanceled",
    "ActivityTaskCompleted",
    "ActivityTaskFailed",
    "ActivityTaskScheduled",
    "ActivityTaskTimedOut",
    "AwaitWorkflowResult",
    "BuildDefault",
    "CancelTimer",
    "CancelWorkflowExecution",
    "ChildDescription",
    "ChildWorkflowEvent",
    "ChildWorkflowExecutionCompleted",
    "ChildWorkflowExecutionFailed",
    "ChildWorkflowExecutionStarted",
    "Command",
    "CompleteWorkflowExecution",
    "CompleteWorkflowUpdate",
    "ConcurrencyLimit",
    "ConcurrencySlot",
    "ConcurrencySlotAcquired",
    "ConcurrencyState",
    "ContinueAsNewWorkflowExecution",
    "DeadLetter",
    "EagerWorkflowTask",
    "EmitHistoryEvent",
    "FailWorkflowExecution",
    "Failure",
    "FireTimer",
    "HistoryEvent",
    "MarkerRecorded",
    "PauseWorkflow",
    "PendingActivity",
    "PendingChild",
    "PendingTimer",
    "Priority",
    "PublishToStream",
    "PurgeClosedRun",
    "QueryWorkflow",
    "QueueLimit",
    "RecentRequest",
    "RecordActivityHeartbeat",
    "RecordMarker",
    "Reply",
    "RequestCancelActivityTask",
    "RequestCancelExternalInitiated",
    "RequestCancelExternalWorkflowExecution",
    "RequestCancelWorkflow",
    "RequestWorkflowHistory",
    "ResetPlan",
    "ResetWorkflow",
    "RespondActivityTaskCompleted",
    "RespondActivityTaskFailed",
    "RespondWorkflowTaskCompleted",
    "RespondWorkflowTaskFailed",
    "RetryPolicy",
    "ScheduleActivityTask",
    "SearchAttributeTime",
    "SearchAttributesUpserted",
    "SignalWorkflow",
    "SlotHolder",
    "StartChildWorkflowExecution",
    "StartChildWorkflowExecutionFailed",
    "StartChildWorkflowExecutionInitiated",
    "StartTimer",
    "StartWorkflow",
    "StreamRecord",
    "StreamRecordPublished",
    "TerminateWorkflow",
    "TimerCanceled",
    "TimerDescription",
    "TimerFired",
    "TimerRecord",
    "TimerStarted",
    "UnpauseWorkflow",
    "UpdateRecord",
    "UpdateWorkflow",
    "UpdateWorkflowBuild",
    "UpsertSearchAttributes",
    "WorkflowCancelRequested",
    "WorkflowDescription",
    "WorkflowExecutionCanceled",
    "WorkflowExecutionCompleted",
    "WorkflowExecutionContinuedAsNew",
    "WorkflowExecutionFailed",
    "WorkflowExecutionPaused",
    "WorkflowExecutionStarted",
    "WorkflowExecutionTerminated",
    "WorkflowExecutionTimedOut",
    "WorkflowExecutionUnpaused",
    "WorkflowQuery",
    "WorkflowSignaled",
    "WorkflowStartDebounced",
    "WorkflowState",
    "WorkflowTask",
    "WorkflowTaskCompleted",
    "WorkflowTaskScheduled",
    "WorkflowUpdateAccepted",
    "WorkflowUpdateCompleted",
]


class Failure(TypedDict):
    """A failure with its cause chain, as recorded in history and replies."""

    #: error class name, e.g. ValueError or ApplicationError
    type: str
    message: str
    stack_trace: NotRequired[str]
    non_retryable: NotRequired[bool]
    details: NotRequired[bytes | None]
    cause: NotRequired["Failure | None"]


class RetryPolicy(TypedDict):
    """The RetryPolicy record."""

    initial_interval_ms: NotRequired[int]
    backoff_coefficient: NotRequired[float]
    maximum_interval_ms: NotRequired[int | None]
    #: 0 means unlimited
    maximum_attempts: NotRequired[int]
    non_retryable_error_types: NotRequired[list[str]]


class ConcurrencyLimit(TypedDict):
    """A concurrency limit a run or an activity holds a slot of while it executes: at most max holders of the key name=value at once, across the namespace."""

    #: what is limited, e.g. tenant or api
    name: str
    #: which one, e.g. acme or stripe
    value: str
    #: holders at once (1: one at a time)
    max: int
    #: null: a concurrency limit (max at once); else a rate limit: at most max admitted in any window of per_ms milliseconds (the others are delayed)
    per_ms: NotRequired[int | None]


class Priority(TypedDict):
    """How a run's or an activity's tasks are ordered when their task queue has a backlog: a priority level (a lane) and a fairness key within it. Fields left unset are inherited from the workflow (an activity, a child, a continued run)."""

    #: 1 (first) to 5 (last); 0: unset (inherited, else 3). Higher levels are dispatched more often, lower ones never starved (weights 16, 8, 4, 2, 1)
    priority_key: NotRequired[int]
    #: tasks of one level share its dispatches among their fairness keys in proportion to the keys' weights (null: inherited, else the key of tasks without one)
    fairness_key: NotRequired[str | None]
    #: the fairness key's weight (0: unset, inherited, else 1)
    fairness_weight: NotRequired[float]


class ActivityOptions(TypedDict):
    """The ActivityOptions record."""

    task_queue: str
    schedule_to_close_timeout_ms: NotRequired[int | None]
    schedule_to_start_timeout_ms: NotRequired[int | None]
    start_to_close_timeout_ms: NotRequired[int | None]
    heartbeat_timeout_ms: NotRequired[int | None]
    retry_policy: NotRequired[RetryPolicy | None]
    #: concurrency limits the activity holds a slot of from its first attempt to its close; dispatch waits for them all
    concurrency: NotRequired[list[ConcurrencyLimit]]
    #: the activity's priority and fairness key (unset fields: the workflow's)
    priority: NotRequired[Priority | None]


class SearchAttributeTime(TypedDict):
    """a datetime search attribute: microseconds since the Unix epoch, UTC"""

    epoch_us: int


class WorkflowExecutionStarted(TypedDict):
    """The WorkflowExecutionStarted record."""

    workflow_type: str
    task_queue: str
    input: bytes
    attempt: NotRequired[int]
    continued_from_run_id: NotRequired[str | None]
    parent_workflow_id: NotRequired[str | None]
    parent_run_id: NotRequired[str | None]
    run_timeout_ms: NotRequired[int | None]
    build_id: NotRequired[str | None]
    search_attributes: NotRequired[dict[str, str | int | float | bool | list[str] | SearchAttributeTime]]
    execution_deadline_ms: NotRequired[int | None]
    #: non-indexed metadata: name -> payload
    memo: NotRequired[dict[str, bytes]]
    #: context set by client interceptors (auth, tenancy), visible to the workflow and its activities
    headers: NotRequired[dict[str, str]]
    #: a cron workflow's schedule (topics.cron): each run closes into the next, whose first workflow task waits for the next time
    cron_schedule: NotRequired[str | None]
    #: a cron run's first workflow task waits until this time (epoch ms)
    first_task_at_ms: NotRequired[int | None]
    concurrency: NotRequired[list[ConcurrencyLimit]]
    #: the run's priority and fairness key (the default of its activities and children)
    priority: NotRequired[Priority | None]


class WorkflowTaskScheduled(TypedDict):
    """The WorkflowTaskScheduled record."""

    task_queue: str
    attempt: NotRequired[int]


class WorkflowTaskCompleted(TypedDict):
    """The WorkflowTaskCompleted record."""

    scheduled_seq: int
    identity: NotRequired[str]
    build_id: NotRequired[str | None]


class ActivityTaskScheduled(TypedDict):
    """The ActivityTaskScheduled record."""

    activity_id: str
    activity_type: str
    input: bytes
    options: ActivityOptions
    workflow_task_completed_seq: int


class ActivityTaskCompleted(TypedDict):
    """The ActivityTaskCompleted record."""

    activity_id: str
    scheduled_seq: int
    attempt: int
    result: bytes
    identity: NotRequired[str]


class ActivityTaskFailed(TypedDict):
    """The ActivityTaskFailed record."""

    activity_id: str
    scheduled_seq: int
    attempt: int
    failure: Failure
    identity: NotRequired[str]


class WorkflowExecutionCompleted(TypedDict):
    """The WorkflowExecutionCompleted record."""

    result: bytes
    #: a cron workflow's next run (null: the workflow closed)
    new_run_id: NotRequired[str | None]


class WorkflowExecutionFailed(TypedDict):
    """The WorkflowExecutionFailed record."""

    failure: Failure
    #: a cron workflow's next run (null: the workflow closed)
    new_run_id: NotRequired[str | None]


class TimerStarted(TypedDict):
    """The TimerStarted record."""

    timer_id: str
    fire_at_ms: int
    workflow_task_completed_seq: int


class TimerFired(TypedDict):
    """The TimerFired record."""

    timer_id: str
    started_seq: int


class TimerCanceled(TypedDict):
    """The TimerCanceled record."""

    timer_id: str
    started_seq: int


class WorkflowSignaled(TypedDict):
    """The WorkflowSignaled record."""

    signal_name: str
    input: bytes
    identity: NotRequired[str]


class ActivityTaskAttemptFailed(TypedDict):
    """One failed attempt of an activity that will be retried; not a result."""

    activity_id: str
    scheduled_seq: int
    attempt: int
    failure: Failure
    #: start_to_close | heartbeat | schedule_to_start when the attempt timed out
    timeout_type: NotRequired[str | None]
    #: backoff before the next attempt
    retry_in_ms: int


class ActivityTaskTimedOut(TypedDict):
    """The ActivityTaskTimedOut record."""

    activity_id: str
    scheduled_seq: int
    attempt: int
    timeout_type: str
    failure: Failure


class ActivityTaskCancelRequested(TypedDict):
    """The ActivityTaskCancelRequested record."""

    activity_id: str
    scheduled_seq: int


class ActivityTaskCanceled(TypedDict):
    """The ActivityTaskCanceled record."""

    activity_id: str
    scheduled_seq: int
    attempt: int
    identity: NotRequired[str]


class WorkflowCancelRequested(TypedDict):
    """The WorkflowCancelRequested record."""

    reason: NotRequired[str]


class WorkflowExecutionCanceled(TypedDict):
    """The WorkflowExecutionCanceled record."""

    details: NotRequired[bytes | None]


class WorkflowExecutionTerminated(TypedDict):
    """The WorkflowExecutionTerminated record."""

    reason: NotRequired[str]
    identity: NotRequired[str]


class WorkflowExecutionContinuedAsNew(TypedDict):
    """The WorkflowExecutionContinuedAsNew record."""

    new_run_id: str
    input: bytes


class WorkflowExecutionTimedOut(TypedDict):
    """The WorkflowExecutionTimedOut record."""

    timeout_type: str
    #: a cron workflow's next run (null: the workflow closed)
    new_run_id: NotRequired[str | None]


class MarkerRecorded(TypedDict):
    """The MarkerRecorded record."""

    name: str
    details: NotRequired[bytes | None]


class SearchAttributesUpserted(TypedDict):
    """The SearchAttributesUpserted record."""

    search_attributes: dict[str, str | int | float | bool | list[str] | SearchAttributeTime]


class StartChildWorkflowExecutionInitiated(TypedDict):
    """The StartChildWorkflowExecutionInitiated record."""

    workflow_id: str
    workflow_type: str
    task_queue: str
    input: bytes
    parent_close_policy: NotRequired[str]
    workflow_task_completed_seq: int


class ChildWorkflowExecutionStarted(TypedDict):
    """The ChildWorkflowExecutionStarted record."""

    initiated_seq: int
    workflow_id: str
    run_id: str


class StartChildWorkflowExecutionFailed(TypedDict):
    """The StartChildWorkflowExecutionFailed record."""

    initiated_seq: int
    workflow_id: str
    cause: str
    run_id: NotRequired[str | None]


class ChildWorkflowExecutionCompleted(TypedDict):
    """The ChildWorkflowExecutionCompleted record."""

    initiated_seq: int
    workflow_id: str
    run_id: str
    result: bytes


class ChildWorkflowExecutionFailed(TypedDict):
    """The ChildWorkflowExecutionFailed record."""

    initiated_seq: int
    workflow_id: str
    run_id: str
    #: failed | canceled | terminated | timed_out
    status: str
    failure: Failure


class RequestCancelExternalInitiated(TypedDict):
    """The RequestCancelExternalInitiated record."""

    workflow_id: str


class WorkflowUpdateAccepted(TypedDict):
    """The WorkflowUpdateAccepted record."""

    update_id: str
    update_name: str
    input: bytes
    identity: NotRequired[str]


class WorkflowUpdateCompleted(TypedDict):
    """The WorkflowUpdateCompleted record."""

    update_id: str
    result: NotRequired[bytes | None]
    failure: NotRequired[Failure | None]


class WorkflowExecutionPaused(TypedDict):
    """An operator paused the run: no workflow or activity task is dispatched and no timer fires until it is unpaused."""

    reason: NotRequired[str]
    identity: NotRequired[str]


class WorkflowExecutionUnpaused(TypedDict):
    """An operator unpaused the run: held tasks are dispatched and timers that fell due meanwhile fire."""

    reason: NotRequired[str]
    identity: NotRequired[str]


class ConcurrencySlotAcquired(TypedDict):
    """The run (or one of its activities) was granted a slot of a concurrency limit; it holds it until the run (or the activity) closes."""

    name: str
    value: str
    max: int
    #: from the request to the grant
    waited_ms: int
    #: null: the run's own slot
    activity_id: NotRequired[str | None]
    #: a rate limit's admission: the time the run (or activity) was admitted at, no earlier than which it starts
    not_before_ms: NotRequired[int | None]
    #: a rate limit's window (null: a concurrency slot, held until the close)
    per_ms: NotRequired[int | None]


class WorkflowStartDebounced(TypedDict):
    """Another start of the workflow ID joined the debounced run before its code ran: the run runs with this input, no earlier than starts_at_ms (the start's request ID is the event's)."""

    #: the start's input: the one the run's code gets, unless a later start joins
    input: bytes
    #: when the run's code runs, unless a later start joins
    starts_at_ms: int


class StreamRecordPublished(TypedDict):
    """workflow code published a value on a stream (the value is on {ns}.streams, not in the history)"""

    stream: str


class HistoryEvent(TypedDict):
    """One event of a workflow run's history; topic {ns}.history, key {workflow_id}/{run_id}/{seq}."""

    event_id: str
    #: the workflow ID
    aggregate_key: str
    run_id: str
    #: 1-based position of the event in its run
    seq: int
    timestamp_ms: int
    trace_id: NotRequired[str | None]
    request_id: NotRequired[str | None]
    attributes: tuple[Literal["WorkflowExecutionStarted"], WorkflowExecutionStarted] | tuple[Literal["WorkflowTaskScheduled"], WorkflowTaskScheduled] | tuple[Literal["WorkflowTaskCompleted"], WorkflowTaskCompleted] | tuple[Literal["ActivityTaskScheduled"], ActivityTaskScheduled] | tuple[Literal["ActivityTaskCompleted"], ActivityTaskCompleted] | tuple[Literal["ActivityTaskFailed"], ActivityTaskFailed] | tuple[Literal["WorkflowExecutionCompleted"], WorkflowExecutionCompleted] | tuple[Literal["WorkflowExecutionFailed"], WorkflowExecutionFailed] | tuple[Literal["TimerStarted"], TimerStarted] | tuple[Literal["TimerFired"], TimerFired] | tuple[Literal["TimerCanceled"], TimerCanceled] | tuple[Literal["WorkflowSignaled"], WorkflowSignaled] | tuple[Literal["ActivityTaskAttemptFailed"], ActivityTaskAttemptFailed] | tuple[Literal["ActivityTaskTimedOut"], ActivityTaskTimedOut] | tuple[Literal["ActivityTaskCancelRequested"], ActivityTaskCancelRequested] | tuple[Literal["ActivityTaskCanceled"], ActivityTaskCanceled] | tuple[Literal["WorkflowCancelRequested"], WorkflowCancelRequested] | tuple[Literal["WorkflowExecutionCanceled"], WorkflowExecutionCanceled] | tuple[Literal["WorkflowExecutionTerminated"], WorkflowExecutionTerminated] | tuple[Literal["WorkflowExecutionContinuedAsNew"], WorkflowExecutionContinuedAsNew] | tuple[Literal["WorkflowExecutionTimedOut"], WorkflowExecutionTimedOut] | tuple[Literal["MarkerRecorded"], MarkerRecorded] | tuple[Literal["SearchAttributesUpserted"], SearchAttributesUpserted] | tuple[Literal["StartChildWorkflowExecutionInitiated"], StartChildWorkflowExecutionInitiated] | tuple[Literal["ChildWorkflowExecutionStarted"], ChildWorkflowExecutionStarted] | tuple[Literal["StartChildWorkflowExecutionFailed"], StartChildWorkflowExecutionFailed] | tuple[Literal["ChildWorkflowExecutionCompleted"], ChildWorkflowExecutionCompleted] | tuple[Literal["ChildWorkflowExecutionFailed"], ChildWorkflowExecutionFailed] | tuple[Literal["RequestCancelExternalInitiated"], RequestCancelExternalInitiated] | tuple[Literal["WorkflowUpdateAccepted"], WorkflowUpdateAccepted] | tuple[Literal["WorkflowUpdateCompleted"], WorkflowUpdateCompleted] | tuple[Literal["WorkflowExecutionPaused"], WorkflowExecutionPaused] | tuple[Literal["WorkflowExecutionUnpaused"], WorkflowExecutionUnpaused] | tuple[Literal["ConcurrencySlotAcquired"], ConcurrencySlotAcquired] | tuple[Literal["WorkflowStartDebounced"], WorkflowStartDebounced] | tuple[Literal["StreamRecordPublished"], StreamRecordPublished]
    #: OpenTelemetry span ID (16 hex digits) of the span that wrote this record, the parent of the reader's span; null: not traced
    span_id: NotRequired[str | None]


class ScheduleActivityTask(TypedDict):
    """The ScheduleActivityTask record."""

    activity_id: str
    activity_type: str
    input: bytes
    options: ActivityOptions
    #: the worker that completes the workflow task asks to run this activity itself: the engine sends the attempt in its reply to the completion instead of the activity-task topic (decision 0054)
    request_eager_execution: NotRequired[bool]


class CompleteWorkflowExecution(TypedDict):
    """The CompleteWorkflowExecution record."""

    result: bytes


class FailWorkflowExecution(TypedDict):
    """The FailWorkflowExecution record."""

    failure: Failure


class StartTimer(TypedDict):
    """The StartTimer record."""

    timer_id: str
    duration_ms: int
    #: an absolute fire time (workflow.sleep_until): the engine fires the timer then, however late it applies the command; null: duration_ms from when it applies it
    fire_at_ms: NotRequired[int | None]


class CancelTimer(TypedDict):
    """The CancelTimer record."""

    timer_id: str


class RequestCancelActivityTask(TypedDict):
    """The RequestCancelActivityTask record."""

    activity_id: str


class CancelWorkflowExecution(TypedDict):
    """The CancelWorkflowExecution record."""

    details: NotRequired[bytes | None]


class ContinueAsNewWorkflowExecution(TypedDict):
    """The ContinueAsNewWorkflowExecution record."""

    input: bytes


class RecordMarker(TypedDict):
    """The RecordMarker record."""

    name: str
    details: NotRequired[bytes | None]


class UpsertSearchAttributes(TypedDict):
    """The UpsertSearchAttributes record."""

    search_attributes: dict[str, str | int | float | bool | list[str] | SearchAttributeTime]


class StartChildWorkflowExecution(TypedDict):
    """The StartChildWorkflowExecution record."""

    workflow_id: str
    workflow_type: str
    task_queue: str
    input: bytes
    #: terminate | request_cancel | abandon
    parent_close_policy: NotRequired[str]
    run_timeout_ms: NotRequired[int | None]
    #: the child run's concurrency limits (a start's)
    concurrency: NotRequired[list[ConcurrencyLimit]]
    #: the child run's priority (unset fields: the parent's)
    priority: NotRequired[Priority | None]


class RequestCancelExternalWorkflowExecution(TypedDict):
    """The RequestCancelExternalWorkflowExecution record."""

    workflow_id: str


class CompleteWorkflowUpdate(TypedDict):
    """Workflow code: an update's handler returned (result) or raised (failure)."""

    update_id: str
    result: NotRequired[bytes | None]
    failure: NotRequired[Failure | None]


class PublishToStream(TypedDict):
    """a value workflow code (a workflow task's command) or an activity attempt (its completion) publishes on one of the workflow's streams"""

    stream: str
    #: the payload, as the publisher's data converter encoded it
    value: bytes


class EagerWorkflowTask(TypedDict):
    """A workflow task the worker ran right after the activity completed, on its cached instance: accepted only if nothing else happened to the workflow since its last completed workflow task"""

    #: the workflow task the instance last completed (its WorkflowTaskScheduled seq; -1 with base_request_id)
    base_scheduled_seq: int
    #: the workflow time the code ran with; recorded as the WorkflowTaskScheduled event's time
    workflow_time_ms: int
    commands: list[tuple[Literal["ScheduleActivityTask"], ScheduleActivityTask] | tuple[Literal["CompleteWorkflowExecution"], CompleteWorkflowExecution] | tuple[Literal["FailWorkflowExecution"], FailWorkflowExecution] | tuple[Literal["StartTimer"], StartTimer] | tuple[Literal["CancelTimer"], CancelTimer] | tuple[Literal["RequestCancelActivityTask"], RequestCancelActivityTask] | tuple[Literal["CancelWorkflowExecution"], CancelWorkflowExecution] | tuple[Literal["ContinueAsNewWorkflowExecution"], ContinueAsNewWorkflowExecution] | tuple[Literal["RecordMarker"], RecordMarker] | tuple[Literal["UpsertSearchAttributes"], UpsertSearchAttributes] | tuple[Literal["StartChildWorkflowExecution"], StartChildWorkflowExecution] | tuple[Literal["RequestCancelExternalWorkflowExecution"], RequestCancelExternalWorkflowExecution] | tuple[Literal["CompleteWorkflowUpdate"], CompleteWorkflowUpdate] | tuple[Literal["PublishToStream"], PublishToStream]]
    build_id: NotRequired[str | None]
    #: set: the instance last completed an eager task that the engine has not confirmed to it yet, the one carried by the command with this request ID
    base_request_id: NotRequired[str | None]


class StartWorkflow(TypedDict):
    """The StartWorkflow record."""

    workflow_type: str
    task_queue: str
    input: bytes
    #: allow_duplicate | allow_duplicate_failed_only | reject_duplicate | terminate_if_running
    id_reuse_policy: NotRequired[str]
    run_timeout_ms: NotRequired[int | None]
    search_attributes: NotRequired[dict[str, str | int | float | bool | list[str] | SearchAttributeTime]]
    #: bounds the whole execution, across continue-as-new runs
    execution_timeout_ms: NotRequired[int | None]
    parent_workflow_id: NotRequired[str | None]
    parent_run_id: NotRequired[str | None]
    parent_initiated_seq: NotRequired[int]
    parent_close_policy: NotRequired[str]
    #: pin the new run to this worker build (set by the engine for a child of a pinned parent on the same task queue); null: the task queue's default build
    build_id: NotRequired[str | None]
    #: non-indexed metadata: name -> payload
    memo: NotRequired[dict[str, bytes]]
    #: context set by client interceptors (auth, tenancy), visible to the workflow and its activities
    headers: NotRequired[dict[str, str]]
    #: a cron workflow's schedule (topics.cron): each run closes into the next, whose first workflow task waits for the next time
    cron_schedule: NotRequired[str | None]
    #: an eager start: the first workflow task, run by a worker in the client's process before the start was sent; recorded with the start when it is accepted and fits (else the run gets an ordinary first task)
    eager_workflow_task: NotRequired[EagerWorkflowTask | None]
    #: execute_workflow: the request ID the run's result is answered to when the workflow closes, as an AwaitWorkflowResult sent right after the start would be (one command instead of two)
    result_request_id: NotRequired[str | None]
    #: concurrency limits the run holds a slot of while it runs; its first workflow task waits for them all
    concurrency: NotRequired[list[ConcurrencyLimit]]
    #: 0: start now; else the run's code waits this long after the last start of the workflow ID that joins it (a debounce), and runs with that start's input
    debounce_ms: NotRequired[int]
    #: with debounce_ms: the longest a debounced run waits from its first start (0: no cap)
    debounce_max_ms: NotRequired[int]
    #: the run's priority and fairness key: the default of its activities and children
    priority: NotRequired[Priority | None]
    #: a standalone activity (decision 0063): the run is this one activity of type workflow_type with these options, and no workflow code; its key is kadence-activity:{activity ID}
    activity: NotRequired[ActivityOptions | None]


class RespondWorkflowTaskCompleted(TypedDict):
    """The RespondWorkflowTaskCompleted record."""

    scheduled_seq: int
    commands: list[tuple[Literal["ScheduleActivityTask"], ScheduleActivityTask] | tuple[Literal["CompleteWorkflowExecution"], CompleteWorkflowExecution] | tuple[Literal["FailWorkflowExecution"], FailWorkflowExecution] | tuple[Literal["StartTimer"], StartTimer] | tuple[Literal["CancelTimer"], CancelTimer] | tuple[Literal["RequestCancelActivityTask"], RequestCancelActivityTask] | tuple[Literal["CancelWorkflowExecution"], CancelWorkflowExecution] | tuple[Literal["ContinueAsNewWorkflowExecution"], ContinueAsNewWorkflowExecution] | tuple[Literal["RecordMarker"], RecordMarker] | tuple[Literal["UpsertSearchAttributes"], UpsertSearchAttributes] | tuple[Literal["StartChildWorkflowExecution"], StartChildWorkflowExecution] | tuple[Literal["RequestCancelExternalWorkflowExecution"], RequestCancelExternalWorkflowExecution] | tuple[Literal["CompleteWorkflowUpdate"], CompleteWorkflowUpdate] | tuple[Literal["PublishToStream"], PublishToStream]]
    identity: NotRequired[str]
    build_id: NotRequired[str | None]


class RespondWorkflowTaskFailed(TypedDict):
    """The RespondWorkflowTaskFailed record."""

    scheduled_seq: int
    #: non_determinism | workflow_error | worker_error
    cause: str
    failure: Failure
    identity: NotRequired[str]
    #: the build of the worker that failed the task; a task of another build is stale
    build_id: NotRequired[str | None]


class RequestWorkflowHistory(TypedDict):
    """A worker that does not hold the workflow's state asks for the task again with the full history."""

    scheduled_seq: int
    identity: NotRequired[str]
    #: the build of the worker that asks; a request from another build is stale
    build_id: NotRequired[str | None]


class RespondActivityTaskCompleted(TypedDict):
    """The RespondActivityTaskCompleted record."""

    activity_id: str
    scheduled_seq: int
    attempt: int
    result: bytes
    identity: NotRequired[str]
    #: set: the workflow's next task, already run by this worker (decision 0031)
    eager_workflow_task: NotRequired[EagerWorkflowTask | None]
    #: what the attempt published on its workflow's streams: written to {ns}.streams only if this result is accepted (decision 0062)
    published: NotRequired[list[PublishToStream]]


class RespondActivityTaskFailed(TypedDict):
    """The RespondActivityTaskFailed record."""

    activity_id: str
    scheduled_seq: int
    attempt: int
    failure: Failure
    identity: NotRequired[str]


class AwaitWorkflowResult(TypedDict):
    """Asks for the run's outcome; the reply comes when the run closes (or at once if wait is false)."""

    #: false: answer at once with the current status
    wait: NotRequired[bool]


class SignalWorkflow(TypedDict):
    """The SignalWorkflow record."""

    signal_name: str
    input: bytes
    #: signal-with-start: start the workflow first if no run is open
    start: NotRequired[StartWorkflow | None]
    identity: NotRequired[str]


class RequestCancelWorkflow(TypedDict):
    """The RequestCancelWorkflow record."""

    reason: NotRequired[str]


class TerminateWorkflow(TypedDict):
    """The TerminateWorkflow record."""

    reason: NotRequired[str]
    identity: NotRequired[str]


class FireTimer(TypedDict):
    """Sent by the timer service when a timer is due."""

    timer_id: str
    fire_at_ms: int
    kind: NotRequired[str]
    scheduled_seq: NotRequired[int]
    attempt: NotRequired[int]


class RecordActivityHeartbeat(TypedDict):
    """The RecordActivityHeartbeat record."""

    activity_id: str
    scheduled_seq: int
    attempt: int
    details: NotRequired[bytes | None]
    identity: NotRequired[str]


class QueryWorkflow(TypedDict):
    """The QueryWorkflow record."""

    query_name: str
    input: bytes


class ChildWorkflowEvent(TypedDict):
    """A child workflow's start or close, sent to its parent (keyed by the parent's workflow ID)."""

    initiated_seq: int
    child_workflow_id: str
    child_run_id: NotRequired[str | None]
    #: started | start_failed | completed | failed | canceled | terminated | timed_out
    kind: str
    result: NotRequired[bytes | None]
    failure: NotRequired[Failure | None]
    message: NotRequired[str]


class ResetWorkflow(TypedDict):
    """Start a new run that branches from a WorkflowTaskCompleted event of the workflow's current run; an open run is terminated. A closed run's history is not kept by the engine: the caller sends the events up to the branch point."""

    workflow_task_completed_seq: int
    reason: NotRequired[str]
    identity: NotRequired[str]
    #: answer what the reset would do (ResetPlan) and change nothing
    dry_run: NotRequired[bool]
    #: a closed run's encoded HistoryEvents 1..workflow_task_completed_seq, read from its history (ignored for an open run)
    kept_events: NotRequired[list[bytes]]


class UpdateWorkflowBuild(TypedDict):
    """Operator command: move a workflow's current run to another worker build (null build_id: unpin)."""

    build_id: NotRequired[str | None]
    identity: NotRequired[str]


class PurgeClosedRun(TypedDict):
    """Archival command: forget a closed run's state (its history is archived at archive_uri)."""

    run_id: str
    archive_uri: NotRequired[str | None]
    identity: NotRequired[str]


class UpdateWorkflow(TypedDict):
    """A client's update request; the command's request_id is the update's ID. Validated by a worker before anything is recorded."""

    update_name: str
    input: bytes
    #: update-with-start: the start, when no run is open
    start: NotRequired[StartWorkflow | None]
    identity: NotRequired[str]


class AcceptWorkflowUpdate(TypedDict):
    """A worker's validation passed: record the update (the command's request_id is the update's ID)."""

    update_name: str
    input: bytes
    identity: NotRequired[str]


class PauseWorkflow(TypedDict):
    """Operator: pause the open run (idempotent by request ID; pausing a paused run changes nothing)."""

    reason: NotRequired[str]
    identity: NotRequired[str]


class UnpauseWorkflow(TypedDict):
    """Operator: unpause the run (idempotent by request ID; unpausing a running run changes nothing)."""

    reason: NotRequired[str]
    identity: NotRequired[str]


class ConcurrencySlot(TypedDict):
    """A slot of a concurrency limit: acquire and release go to the limit's owning partition (the command's key is the limit key), grant and refuse to the holder's workflow."""

    #: acquire, release (to the key's owner), grant, refuse (to the holder), set (an operator's max, to the owner: max 0 lifts it; holder names who, message why)
    kind: str
    name: str
    value: str
    #: acquire: the limit the requester names (the latest request's applies)
    max: NotRequired[int]
    #: the workflow ID of the run that asks or holds
    holder: str
    #: which request of the holder: the run chain's ticket, or run ID and activity ID
    ticket: str
    #: null: a slot for the run itself
    activity_id: NotRequired[str | None]
    requested_ms: NotRequired[int]
    message: NotRequired[str]
    #: the limit's window when it is a rate limit
    per_ms: NotRequired[int | None]
    #: a rate limit's grant: the holder starts no earlier than this (0: now)
    not_before_ms: NotRequired[int]


class Command(TypedDict):
    """Every input to a workflow state machine; topic {ns}.commands, key = workflow ID."""

    event_id: str
    #: the workflow ID; also the record key
    aggregate_key: str
    timestamp_ms: int
    trace_id: NotRequired[str | None]
    request_id: NotRequired[str | None]
    idempotency_key: NotRequired[str | None]
    expected_version: NotRequired[int | None]
    run_id: NotRequired[str | None]
    body: tuple[Literal["StartWorkflow"], StartWorkflow] | tuple[Literal["RespondWorkflowTaskCompleted"], RespondWorkflowTaskCompleted] | tuple[Literal["RespondWorkflowTaskFailed"], RespondWorkflowTaskFailed] | tuple[Literal["RequestWorkflowHistory"], RequestWorkflowHistory] | tuple[Literal["RespondActivityTaskCompleted"], RespondActivityTaskCompleted] | tuple[Literal["RespondActivityTaskFailed"], RespondActivityTaskFailed] | tuple[Literal["AwaitWorkflowResult"], AwaitWorkflowResult] | tuple[Literal["SignalWorkflow"], SignalWorkflow] | tuple[Literal["RequestCancelWorkflow"], RequestCancelWorkflow] | tuple[Literal["TerminateWorkflow"], TerminateWorkflow] | tuple[Literal["FireTimer"], FireTimer] | tuple[Literal["RecordActivityHeartbeat"], RecordActivityHeartbeat] | tuple[Literal["QueryWorkflow"], QueryWorkflow] | tuple[Literal["ChildWorkflowEvent"], ChildWorkflowEvent] | tuple[Literal["ResetWorkflow"], ResetWorkflow] | tuple[Literal["UpdateWorkflowBuild"], UpdateWorkflowBuild] | tuple[Literal["PurgeClosedRun"], PurgeClosedRun] | tuple[Literal["UpdateWorkflow"], UpdateWorkflow] | tuple[Literal["AcceptWorkflowUpdate"], AcceptWorkflowUpdate] | tuple[Literal["PauseWorkflow"], PauseWorkflow] | tuple[Literal["UnpauseWorkflow"], UnpauseWorkflow] | tuple[Literal["ConcurrencySlot"], ConcurrencySlot]
    #: OpenTelemetry span ID (16 hex digits) of the span that wrote this record, the parent of the reader's span; null: not traced
    span_id: NotRequired[str | None]


class WorkflowQuery(TypedDict):
    """The WorkflowQuery record."""

    request_id: str
    query_name: str
    input: bytes
    #: an update's validation, not a query
    update: NotRequired[bool]


class WorkflowTask(TypedDict):
    """Work for a workflow worker; topic {ns}.tasks.workflow.{queue}, key = workflow ID."""

    workflow_id: str
    run_id: str
    workflow_type: str
    task_queue: str
    scheduled_seq: int
    attempt: NotRequired[int]
    full_history: bool
    events: list[HistoryEvent]
    trace_id: NotRequired[str | None]
    #: set: answer this query from the workflow's state, change nothing
    query: NotRequired[WorkflowQuery | None]
    #: the build whose workers must run this task (null: unversioned workers)
    build_id: NotRequired[str | None]
    #: OpenTelemetry span ID (16 hex digits) of the span that wrote this record, the parent of the reader's span; null: not traced
    span_id: NotRequired[str | None]
    #: set: the events did not fit in this record (events is empty): read the run's history from the history topic, up to scheduled_seq (a query: all of it)
    history_in_topic: NotRequired[bool]


class ActivityTask(TypedDict):
    """Work for an activity worker; topic {ns}.tasks.activity.{queue}, key = workflow ID."""

    workflow_id: str
    run_id: str
    workflow_type: str
    activity_id: str
    activity_type: str
    task_queue: str
    input: bytes
    attempt: int
    scheduled_seq: int
    scheduled_time_ms: int
    #: {workflow_id}/{run_id}/{activity_id}, stable across attempts
    idempotency_key: str
    heartbeat_details: NotRequired[bytes | None]
    start_to_close_timeout_ms: NotRequired[int | None]
    heartbeat_timeout_ms: NotRequired[int | None]
    trace_id: NotRequired[str | None]
    #: OpenTelemetry span ID (16 hex digits) of the span that wrote this record, the parent of the reader's span; null: not traced
    span_id: NotRequired[str | None]
    #: context set by client interceptors (auth, tenancy), visible to the workflow and its activities
    headers: NotRequired[dict[str, str]]
    #: the attempt's priority and fairness key, as dispatched (its lane is the topic it was sent to)
    priority: NotRequired[Priority | None]


class TimerRecord(TypedDict):
    """A durable timer on a delay topic {ns}.timers.{tier}, key = workflow ID."""

    workflow_id: str
    run_id: str
    timer_id: str
    fire_at_ms: int
    #: user | activity_timeout | retry_backoff | run_timeout | workflow_task_timeout
    kind: NotRequired[str]
    #: for activity timeouts and retries: the activity's scheduled event
    scheduled_seq: NotRequired[int]
    attempt: NotRequired[int]


class ActivityDescription(TypedDict):
    """A pending activity as describe shows it (its input left out)."""

    activity_id: str
    activity_type: str
    task_queue: str
    attempt: int
    scheduled_seq: int
    first_scheduled_ms: int
    attempt_started_ms: int
    last_heartbeat_ms: int
    #: left out when over 4 KiB
    heartbeat_details: NotRequired[bytes | None]
    last_failure: NotRequired[Failure | None]
    retrying: NotRequired[bool]
    next_attempt_ms: NotRequired[int | None]
    cancel_requested: NotRequired[bool]
    #: not dispatched: the run is paused
    held: NotRequired[bool]
    waiting_for_slot: NotRequired[ConcurrencyLimit | None]
    #: it waits for a rate limit's admission time (next_attempt_ms)
    throttled: NotRequired[bool]
    #: the activity's priority and fairness key, as dispatched
    priority: NotRequired[Priority | None]


class TimerDescription(TypedDict):
    """The TimerDescription record."""

    timer_id: str
    fire_at_ms: int
    kind: str


class ChildDescription(TypedDict):
    """The ChildDescription record."""

    workflow_id: str
    run_id: NotRequired[str | None]
    initiated_seq: int


class WorkflowDescription(TypedDict):
    """A run as describe shows it, built by the processor from the run's state."""

    workflow_type: str
    task_queue: str
    build_id: NotRequired[str | None]
    start_time_ms: int
    close_time_ms: NotRequired[int | None]
    parent_workflow_id: NotRequired[str | None]
    parent_run_id: NotRequired[str | None]
    children: NotRequired[list[ChildDescription]]
    pending_activities: NotRequired[list[ActivityDescription]]
    pending_timers: NotRequired[list[TimerDescription]]
    signals_received: NotRequired[int]
    open_updates: NotRequired[int]
    search_attributes: NotRequired[dict[str, str | int | float | bool | list[str] | SearchAttributeTime]]
    history_length: NotRequired[int]
    continued_run_id: NotRequired[str | None]
    paused: NotRequired[bool]
    #: timers that fell due while paused (they fire at unpause)
    held_timers: NotRequired[int]
    #: bytes of the run's history records (null: the run started before the engine counted them)
    history_size_bytes: NotRequired[int | None]
    #: a cron workflow's schedule (topics.cron): each run closes into the next, whose first workflow task waits for the next time
    cron_schedule: NotRequired[str | None]
    first_task_at_ms: NotRequired[int | None]
    #: the limit the run waits for a slot of
    waiting_for_slot: NotRequired[ConcurrencyLimit | None]
    slots_held: NotRequired[list[ConcurrencyLimit]]
    #: the run waits for a rate limit's admission time
    throttled_until_ms: NotRequired[int | None]
    #: the run's priority and fairness key
    priority: NotRequired[Priority | None]
    #: the workflow published on a stream (its final close ends its streams with a record on {ns}.streams)
    streams_used: NotRequired[bool]


class ResetPlan(TypedDict):
    """What a reset did, or (dry run) would do."""

    #: the open run the reset terminates (null: the run was closed)
    terminates_run_id: NotRequired[str | None]
    #: status of the run reset
    from_status: NotRequired[str]
    branch_event: NotRequired[int]
    #: events copied into the new run
    kept_events: NotRequired[int]
    #: types of the activities the new run schedules again
    activities_rerun: NotRequired[list[str]]
    timers_kept: NotRequired[int]


class Reply(TypedDict):
    """The outcome of a command, for whoever waits on it; topic {ns}.replies, key = request ID."""

    request_id: str
    workflow_id: str
    run_id: NotRequired[str | None]
    #: ok | already_started | not_found | rejected | completed | failed | running
    status: str
    message: NotRequired[str]
    #: consistency token: history partition offset reached by the change
    history_offset: NotRequired[int | None]
    result: NotRequired[bytes | None]
    failure: NotRequired[Failure | None]
    #: consistency token: sequence number of the last history event the command produced in run_id (null when it produced none)
    history_seq: NotRequired[int | None]
    #: describe: the run's memo
    memo: NotRequired[dict[str, bytes]]
    #: describe (AwaitWorkflowResult with wait false): the run's state, for operators
    description: NotRequired[WorkflowDescription | None]
    #: reset: what it did or, for a dry run, would do
    reset_plan: NotRequired[ResetPlan | None]
    #: a workflow-task completion that asked for eager activities: the attempts the engine dispatched to the asking worker (decision 0054)
    activity_tasks: NotRequired[list[ActivityTask]]


class PendingActivity(TypedDict):
    """The PendingActivity record."""

    activity_id: str
    activity_type: str
    scheduled_seq: int
    attempt: NotRequired[int]
    task_queue: str
    input: NotRequired[bytes]
    options: NotRequired[ActivityOptions | None]
    first_scheduled_ms: NotRequired[int]
    attempt_started_ms: NotRequired[int]
    last_heartbeat_ms: NotRequired[int]
    heartbeat_details: NotRequired[bytes | None]
    cancel_requested: NotRequired[bool]
    retrying: NotRequired[bool]
    last_failure: NotRequired[Failure | None]
    #: while retrying: when the next attempt is dispatched
    next_attempt_ms: NotRequired[int | None]
    #: an attempt not dispatched because the run is paused
    held: NotRequired[bool]
    slots_held: NotRequired[int]
    #: it holds its slots and waits for the admission time of a rate limit (next_attempt_ms)
    throttled: NotRequired[bool]


class RecentRequest(TypedDict):
    """The RecentRequest record."""

    request_id: str
    run_id: str
    status: str
    message: NotRequired[str]


class PendingTimer(TypedDict):
    """The PendingTimer record."""

    timer_id: str
    fire_at_ms: int
    started_seq: NotRequired[int]
    kind: NotRequired[str]


class PendingChild(TypedDict):
    """The PendingChild record."""

    workflow_id: str
    initiated_seq: int
    run_id: NotRequired[str | None]
    parent_close_policy: NotRequired[str]


class UpdateRecord(TypedDict):
    """An accepted update of the run, its outcome once it has one (a retried request is answered from it)."""

    update_id: str
    update_name: str
    #: accepted, completed or failed
    status: str
    result: NotRequired[bytes | None]
    failure: NotRequired[Failure | None]


class WorkflowState(TypedDict):
    """Mutable per-workflow state; topic {ns}.state (compacted), key = workflow ID."""

    workflow_id: str
    run_id: str
    workflow_type: str
    task_queue: str
    #: running | completed | failed
    status: str
    start_time_ms: int
    close_time_ms: NotRequired[int | None]
    next_seq: int
    wt_scheduled_seq: NotRequired[int | None]
    wt_attempt: NotRequired[int]
    wt_last_completed_seq: NotRequired[int]
    wt_needed: NotRequired[bool]
    wt_failure: NotRequired[Failure | None]
    wt_failure_cause: NotRequired[str | None]
    pending_activities: NotRequired[list[PendingActivity]]
    recent_requests: NotRequired[list[RecentRequest]]
    result: NotRequired[bytes | None]
    failure: NotRequired[Failure | None]
    result_waiters: NotRequired[list[str]]
    pending_timers: NotRequired[list[PendingTimer]]
    cancel_requested: NotRequired[bool]
    signals_seen: NotRequired[int]
    continued_run_id: NotRequired[str | None]
    history_warned: NotRequired[bool]
    run_timeout_ms: NotRequired[int | None]
    search_attributes: NotRequired[dict[str, str | int | float | bool | list[str] | SearchAttributeTime]]
    execution_deadline_ms: NotRequired[int | None]
    pending_children: NotRequired[list[PendingChild]]
    parent_workflow_id: NotRequired[str | None]
    parent_run_id: NotRequired[str | None]
    parent_initiated_seq: NotRequired[int]
    #: the worker build the current run is pinned to (null: unversioned)
    build_id: NotRequired[str | None]
    #: request ID of the command whose eager workflow task is the last completed one (null: an ordinary one)
    wt_last_eager_request: NotRequired[str | None]
    #: OpenTelemetry trace ID (32 hex digits) of the run's start: records caused by no traced command (a timer firing) continue this trace
    trace_id: NotRequired[str | None]
    #: span ID of the start's processing span (the parent of spans with no other)
    span_id: NotRequired[str | None]
    updates: NotRequired[list[UpdateRecord]]
    #: non-indexed metadata: name -> payload
    memo: NotRequired[dict[str, bytes]]
    #: context set by client interceptors (auth, tenancy), visible to the workflow and its activities
    headers: NotRequired[dict[str, str]]
    paused: NotRequired[bool]
    #: timers that fell due while the run was paused: they fire at unpause
    held_timers: NotRequired[list[FireTimer]]
    #: bytes of this run's history records as written (Avro, with their header); null for a run started before schema version 11
    history_bytes: NotRequired[int | None]
    #: a cron workflow's schedule (topics.cron): each run closes into the next, whose first workflow task waits for the next time
    cron_schedule: NotRequired[str | None]
    #: the input every run of a cron workflow starts with
    cron_input: NotRequired[bytes | None]
    #: a cron run's first workflow task waits until then (null: not waiting)
    first_task_at_ms: NotRequired[int | None]
    #: the run chain's limits, in the order they are acquired (sorted by key)
    concurrency: NotRequired[list[ConcurrencyLimit]]
    #: how many of concurrency (from the first) are held
    slots_held: NotRequired[int]
    #: the ticket of the chain's requests (kept across continue-as-new, cron runs and a reset of an open run)
    slot_ticket: NotRequired[str | None]
    slot_wait_since_ms: NotRequired[int | None]
    #: the run's first workflow task waits for a rate limit's admission time
    throttled_until_ms: NotRequired[int | None]
    #: a debounced run waiting: its code runs then, unless another start of the workflow ID joins it (and moves the time)
    debounce_until_ms: NotRequired[int | None]
    #: the latest a debounced run waits until (its first start plus debounce_max_ms)
    debounce_deadline_ms: NotRequired[int | None]
    #: the run's priority and fairness key (the default of its activities and children)
    priority: NotRequired[Priority | None]
    #: the workflow (this run or an earlier one of its chain) published on a stream: its final close ends its streams with a record on {ns}.streams (decision 0062)
    streams_used: NotRequired[bool]


class DeadLetter(TypedDict):
    """A record that could not be processed; topic {ns}.dlq, key = original key."""

    origin_topic: str
    origin_partition: int
    origin_offset: int
    key: NotRequired[bytes | None]
    value: NotRequired[bytes | None]
    reason: str
    error_type: str
    component: str
    timestamp_ms: int


class BuildDefault(TypedDict):
    """The worker build that new workflows of a task queue start on; topic {ns}.builds (compacted), key = task queue."""

    task_queue: str
    #: null: new workflows are unversioned
    build_id: NotRequired[str | None]
    timestamp_ms: int
    identity: NotRequired[str]


class QueueLimit(TypedDict):
    """The rate limits and concurrency rules of one task queue's activities, across all its workers; topic {ns}.queue_limits (compacted), key = task queue. A record with no limits lifts them (and names who did)."""

    task_queue: str
    #: null: the queue as a whole is not limited
    activities_per_second: NotRequired[float | None]
    #: activity type -> its own limit in activities per second (within the queue's)
    activity_types: NotRequired[dict[str, float]]
    timestamp_ms: int
    identity: NotRequired[str]
    reason: NotRequired[str]
    #: activity type ('*': every activity of the queue) -> at most this many executing at once, across the namespace (a concurrency limit the processor adds to each activity it schedules on the queue)
    activity_concurrency: NotRequired[dict[str, int]]


class SlotHolder(TypedDict):
    """A holder of, or a waiter for, a slot of a concurrency limit."""

    holder: str
    ticket: str
    activity_id: NotRequired[str | None]
    #: holders: when granted; waiters: when requested
    since_ms: int


class ConcurrencyState(TypedDict):
    """One concurrency limit's holders and waiters (first come, first served); topic {ns}.concurrency (compacted, partitioned as the commands), key = the limit key name=value, written in the owning partition's transactions."""

    name: str
    value: str
    max: int
    holders: NotRequired[list[SlotHolder]]
    waiters: NotRequired[list[SlotHolder]]
    #: slots granted since the key was first used
    granted: NotRequired[int]
    updated_ms: NotRequired[int]
    #: a rate limit's window (null: a concurrency limit)
    per_ms: NotRequired[int | None]
    #: a rate limit's latest admissions (at most max, oldest first): the next is admitted no earlier than the max-th latest plus per_ms
    recent_ms: NotRequired[list[int]]
    #: an operator's max (kadence limits set): it applies instead of the max the requests name, until lifted
    override_max: NotRequired[int | None]
    #: who set (or lifted) the operator's max
    override_by: NotRequired[str]
    #: why
    override_reason: NotRequired[str]
    #: when
    override_ms: NotRequired[int]


class StreamRecord(TypedDict):
    """one value of a workflow's stream on {ns}.streams (key: the workflow ID), written by the processor in the transaction that accepted it (decision 0062)"""

    workflow_id: str
    run_id: str
    #: empty on the record that ends every stream of the workflow (end = true)
    stream: str
    value: NotRequired[bytes | None]
    #: set: published by this activity's attempt; null: by workflow code
    activity_id: NotRequired[str | None]
    attempt: NotRequired[int]
    #: the history event that accepted it (a StreamRecordPublished, an ActivityTaskCompleted or the run's close)
    history_seq: int
    timestamp_ms: int
    #: the workflow closed: no record follows for any of its streams
    end: NotRequired[bool]


_T = TypeVar("_T", contravariant=True)
_S = TypeVar("_S", contravariant=True)
_R = TypeVar("_R", covariant=True)


class EmitHistoryEvent(Protocol[_T, _S, _R]):
    """A history event appended to a run, its attributes typed by its event type."""

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["WorkflowExecutionStarted"], attributes: WorkflowExecutionStarted, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["WorkflowTaskScheduled"], attributes: WorkflowTaskScheduled, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["WorkflowTaskCompleted"], attributes: WorkflowTaskCompleted, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["ActivityTaskScheduled"], attributes: ActivityTaskScheduled, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["ActivityTaskCompleted"], attributes: ActivityTaskCompleted, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["ActivityTaskFailed"], attributes: ActivityTaskFailed, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["WorkflowExecutionCompleted"], attributes: WorkflowExecutionCompleted, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["WorkflowExecutionFailed"], attributes: WorkflowExecutionFailed, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["TimerStarted"], attributes: TimerStarted, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["TimerFired"], attributes: TimerFired, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["TimerCanceled"], attributes: TimerCanceled, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["WorkflowSignaled"], attributes: WorkflowSignaled, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["ActivityTaskAttemptFailed"], attributes: ActivityTaskAttemptFailed, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["ActivityTaskTimedOut"], attributes: ActivityTaskTimedOut, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["ActivityTaskCancelRequested"], attributes: ActivityTaskCancelRequested, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["ActivityTaskCanceled"], attributes: ActivityTaskCanceled, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["WorkflowCancelRequested"], attributes: WorkflowCancelRequested, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["WorkflowExecutionCanceled"], attributes: WorkflowExecutionCanceled, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["WorkflowExecutionTerminated"], attributes: WorkflowExecutionTerminated, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["WorkflowExecutionContinuedAsNew"], attributes: WorkflowExecutionContinuedAsNew, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["WorkflowExecutionTimedOut"], attributes: WorkflowExecutionTimedOut, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["MarkerRecorded"], attributes: MarkerRecorded, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["SearchAttributesUpserted"], attributes: SearchAttributesUpserted, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["StartChildWorkflowExecutionInitiated"], attributes: StartChildWorkflowExecutionInitiated, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["ChildWorkflowExecutionStarted"], attributes: ChildWorkflowExecutionStarted, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["StartChildWorkflowExecutionFailed"], attributes: StartChildWorkflowExecutionFailed, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["ChildWorkflowExecutionCompleted"], attributes: ChildWorkflowExecutionCompleted, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["ChildWorkflowExecutionFailed"], attributes: ChildWorkflowExecutionFailed, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["RequestCancelExternalInitiated"], attributes: RequestCancelExternalInitiated, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["WorkflowUpdateAccepted"], attributes: WorkflowUpdateAccepted, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["WorkflowUpdateCompleted"], attributes: WorkflowUpdateCompleted, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["WorkflowExecutionPaused"], attributes: WorkflowExecutionPaused, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["WorkflowExecutionUnpaused"], attributes: WorkflowExecutionUnpaused, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["ConcurrencySlotAcquired"], attributes: ConcurrencySlotAcquired, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["WorkflowStartDebounced"], attributes: WorkflowStartDebounced, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...

    @overload
    def __call__(
        self, t: _T, st: _S, etype: Literal["StreamRecordPublished"], attributes: StreamRecordPublished, *, request_id: str | None = None, ts: int | None = None
    ) -> _R: ...
