"""Request and response bodies of the gateway's operations (they are the OpenAPI document's schemas)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from kadence.topics.identifiers import MAX_ID_LENGTH, MAX_NAME_LENGTH, TASK_QUEUE_PATTERN, problem

from .middleware import SLASH

__all__ = [
    "DecodeRequest",
    "NameParam",
    "QueryRequest",
    "ReasonRequest",
    "RunResponse",
    "SignalRequest",
    "StartRequest",
    "StartResponse",
    "WorkflowIdInPath",
    "WorkflowIdParam",
    "WorkflowList",
    "WorkflowSummary",
]

#: a task queue names Kafka topics ({ns}.tasks.activity.{queue}), which Kafka caps at 249 characters
#: a task queue name in a body
TaskQueueParam = Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=TASK_QUEUE_PATTERN)]


def _workflow_id(value: str) -> str:
    why = problem(value, max_length=MAX_ID_LENGTH, slash=True)
    if why:
        raise ValueError(why)
    return value


def _workflow_id_in_path(value: str) -> str:
    # an encoded slash in the path (middleware.EncodedSlashes; a NUL sent as %00 never gets here)
    return _workflow_id(value.replace(SLASH, "/"))


def _name(value: str) -> str:
    why = problem(value, max_length=MAX_NAME_LENGTH, slash=False)
    if why:
        raise ValueError(why)
    return value


#: a workflow ID (``kadence.topics.identifiers``) in a body: 400 ``invalid_input`` naming it
WorkflowIdParam = Annotated[str, AfterValidator(_workflow_id)]
#: a workflow ID in a path, where an encoded slash arrives as ``SLASH``
WorkflowIdInPath = Annotated[str, AfterValidator(_workflow_id_in_path)]
#: a workflow type, signal or query name
NameParam = Annotated[str, AfterValidator(_name)]


class ConcurrencyLimitModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(..., min_length=1, max_length=200, pattern=r"^[^=]+$", description="what is limited, e.g. tenant")
    value: str = Field(..., min_length=1, max_length=1000, description="which one, e.g. acme")
    max: int = Field(..., ge=1, le=1_000_000, description="holders at once (a rate limit: admissions per window)")
    per_seconds: float | None = Field(
        None,
        gt=0,
        le=7 * 86400,
        description="a rate limit instead: at most max start in any window of this many seconds (the others are "
        "delayed, first come first served)",
    )


class PriorityModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    priority_key: int | None = Field(
        None, ge=1, le=5, description="1 (first) to 5 (last); unset: 3 (or, for a child, its parent's)"
    )
    fairness_key: str | None = Field(
        None,
        min_length=1,
        max_length=255,
        description="within a level, the keys (tenants, say) share the dispatches in proportion to their weights",
    )
    fairness_weight: float | None = Field(None, gt=0, le=1000, description="the fairness key's weight (default 1)")


class StartRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    workflow_id: WorkflowIdParam | None = Field(
        None,
        description="defaults to an ID derived from the Idempotency-Key (so that a "
        "retry starts nothing new), or a random UUID without one",
    )
    task_queue: TaskQueueParam = Field(...)
    input: list[Any] = Field(default_factory=list, description="the workflow's positional arguments")
    id_reuse_policy: Literal[
        "allow_duplicate", "allow_duplicate_failed_only", "reject_duplicate", "terminate_if_running"
    ] = Field("allow_duplicate", description="whether a closed run's workflow ID may start again")
    search_attributes: dict[str, Any] = Field(
        default_factory=dict,
        max_length=100,
        description="indexed attributes for listing (GET /v1/workflows?search=key:value): each a "
        'string, a list of strings, an integer, a number, a boolean or {"datetime": "<ISO 8601>"}',
    )
    cron_schedule: str | None = Field(
        None,
        max_length=200,
        description='a cron workflow ("*/5 * * * *", "@hourly", "@every 30s", optionally prefixed '
        '"CRON_TZ=<zone> "): each run is followed by the next at the schedule\'s next time',
    )
    run_timeout_seconds: float | None = Field(
        None, gt=0, le=10 * 365 * 86400, description="bounds this run; the run times out after it"
    )
    execution_timeout_seconds: float | None = Field(
        None, gt=0, le=10 * 365 * 86400, description="bounds the whole execution, across continue-as-new"
    )
    wait_seconds: float = Field(
        0,
        ge=0,
        le=60,
        description="wait up to this long for the run to close and "
        "return its result (status stays 'running' otherwise)",
    )
    concurrency: list[ConcurrencyLimitModel] = Field(
        default_factory=list,
        max_length=8,
        description="concurrency limits the run holds a slot of from its start to its close; its "
        "code waits until it holds them all (first come, first served)",
    )
    debounce_seconds: float = Field(
        0,
        ge=0,
        le=7 * 86400,
        description="a debounced start: the run's code waits this long; another debounced start of "
        "the workflow ID meanwhile joins the run (the same run_id), gives it its input and restarts the wait",
    )
    debounce_max_seconds: float = Field(
        0, ge=0, le=7 * 86400, description="with debounce_seconds: the longest wait from the first start (0: none)"
    )
    priority: PriorityModel | None = Field(
        None,
        description="how the run's activities and children are ordered when their task queue has a backlog "
        "(they inherit what they do not set)",
    )
    request_eager_start: bool = Field(
        False,
        description="when a worker runs in the gateway's process for this task queue and workflow "
        "type, it runs the run's first workflow task before the start is sent, and the engine "
        "records both in one transaction (otherwise an ordinary start)",
    )


class StartResponse(BaseModel):
    workflow_id: str
    run_id: str
    status: str | None = Field(None, description="with wait_seconds: the run's status when the wait ended")
    result: Any = Field(None, description="with wait_seconds: the result of a completed run")
    failure: dict[str, Any] | None = Field(None, description="with wait_seconds: type and message of a failed run")


class SignalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    signal: NameParam = Field(..., description="the signal's name")
    input: list[Any] = Field(default_factory=list, description="the signal handler's arguments")
    workflow_type: NameParam | None = Field(
        None, description="signal-with-start: start this type first if no run is open"
    )
    task_queue: TaskQueueParam | None = Field(None, description="signal-with-start: the task queue of the run to start")
    start_input: list[Any] = Field(default_factory=list, description="signal-with-start: the workflow's arguments")


class ReasonRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field("", max_length=2000)


class LimitMaxRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max: int = Field(..., ge=1, le=1_000_000, description="the max that applies from now on, instead of the requests'")
    per_seconds: float | None = Field(
        None, gt=0, le=7 * 86400, description="the key's rate limit (its window) rather than its concurrency limit"
    )
    reason: str = Field("", max_length=500, description="why (kept with the key's record, audited)")


class QueueLimitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    activities_per_second: float | None = Field(
        None, gt=0, le=1_000_000, description="the queue's limit, across all its workers (null: not limited)"
    )
    activity_types: dict[Annotated[str, StringConstraints(min_length=1, max_length=200)], float] = Field(
        default_factory=dict, max_length=100, description="activity type -> its own limit in activities per second"
    )
    activity_concurrency: dict[Annotated[str, StringConstraints(min_length=1, max_length=200)], int] = Field(
        default_factory=dict,
        max_length=100,
        description="activity type ('*': all) -> at most this many executing at once, across the namespace",
    )
    reason: str = Field("", max_length=500, description="why (kept with the limit, shown by describe)")


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input: list[Any] = Field(default_factory=list, description="the query handler's arguments")


class UpdateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input: list[Any] = Field(default_factory=list, description="the update handler's arguments")
    workflow_type: NameParam | None = Field(
        None, description="update-with-start: start this type first if no run is open"
    )
    task_queue: TaskQueueParam | None = Field(None, description="update-with-start: the task queue of the run to start")
    start_input: list[Any] = Field(default_factory=list, description="update-with-start: the workflow's arguments")
    wait_seconds: float = Field(
        15,
        gt=0,
        le=3600,
        description="how long to wait for the update's result (capped by the gateway's "
        "KADENCE_GATEWAY_MAX_WAIT_S); past it a 503: retry with the same "
        "Idempotency-Key to get the result of the same update",
    )


class ResetRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    to_event: int | None = Field(
        None, ge=1, description="the WorkflowTaskCompleted event to branch from (default: the last one)"
    )
    reason: str = Field("", max_length=2000)
    dry_run: bool = Field(
        False,
        description="answer what the reset would do (the engine runs it and rolls it "
        "back): the same plan or the same 409, and nothing changes",
    )


class ResetPlanModel(BaseModel):
    terminates_run_id: str | None = Field(description="the open run the reset terminates (null: it was closed)")
    from_status: str
    branch_event: int
    kept_events: int
    activities_rerun: list[str]
    timers_kept: int


class ResetResponse(BaseModel):
    workflow_id: str
    run_id: str | None = Field(description="the new run (null for a dry run)")
    dry_run: bool
    plan: ResetPlanModel | None = Field(
        None,
        description="what the reset did or would do (null in the answer to a retried request: the run_id is the same)",
    )


class BatchStarted(BaseModel):
    batch_id: str = Field(description="the batch's workflow ID (GET /v1/batches/{batch_id} for its progress)")
    run_id: str | None


class UpdateResponse(BaseModel):
    workflow_id: str
    run_id: str | None
    result: Any = None


class DecodeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    payloads: list[str] = Field(
        min_length=1, max_length=100, description="payloads as they are in the log (base64 of their bytes), at most 100"
    )


class RunResponse(BaseModel):
    workflow_id: str
    run_id: str | None


class WorkflowSummary(BaseModel):
    workflow_id: str
    run_id: str
    workflow_type: str | None = None
    status: str | None = None
    paused: bool = False
    task_queue: str | None = None
    start_time_ms: int | None = None
    close_time_ms: int | None = None
    search_attributes: dict[str, Any] = Field(default_factory=dict)
    parent_workflow_id: str | None = None
    continued_from_run_id: str | None = None
    new_run_id: str | None = None
    last_seq: int | None = None


class WorkflowList(BaseModel):
    workflows: list[WorkflowSummary]
    next_cursor: str | None = Field(None, description="pass as cursor for the next page; null on the last page")
    counts: dict[str, Any] | None = Field(None, description="with include_counts: total, by_type and by_status")
