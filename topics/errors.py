"""Kadence's one error tree.

Every error Kadence raises derives from :class:`KadenceError`; Kafka and Redis client errors are
translated where they enter (``raise ... from exc``)::

    KadenceError
    ├── ConfigError                 bad or missing configuration
    │   ├── KafkaAuthenticationError  the brokers refuse this client's credentials or TLS
    │   └── KafkaAuthorizationError   the brokers' ACLs do not allow what this client asked
    ├── SchemaError                 a record that does not decode / encode
    │   └── PayloadTypeError        a payload does not match the type its receiver declares
    ├── SchemaRegistryError         the schema registry (KADENCE_SCHEMA_REGISTRY_URL)
    │   ├── SchemaRegistryUnavailableError  it did not answer (retry)
    │   ├── SchemaNotRegisteredError  a subject lacks a schema (also a ConfigError: topics apply)
    │   ├── SchemaRegistryAccessError  401/403 (also a ConfigError)
    │   └── IncompatibleSchemaError  refused by the compatibility rule (also a SchemaError)
    ├── TopicError                  topic catalogue problems
    │   └── PartitionMismatchError  an existing topic has the wrong partition count
    ├── BrokerUnavailableError      Kafka cannot be reached / timed out
    │   └── NoReplyError            Kafka took the command, no engine answered in time
    ├── WrongPartitionError         a command was produced to a partition its key does not hash to
    ├── PayloadTooLargeError        a command over the Kafka message size limit (nothing was written)
    ├── InvalidIdentifierError      a bad workflow ID, task queue or name (nothing was sent)
    ├── InvalidArgumentError        an argument that can never be valid (nothing was sent; ``field``)
    ├── InvalidQueryError           a bad visibility / history read-model query or cursor
    ├── ProjectionError             a projection cannot be rebuilt (e.g. a rebuild is running)
    ├── ArchiveError                an archived history cannot be written, read or verified
    ├── WorkflowError               outcomes of workflow operations
    │   ├── WorkflowAlreadyStartedError   (carries the existing run ID)
    │   ├── WorkflowNotFoundError
    │   ├── CommandRejectedError    the engine refused a command (a run not running, a failed check)
    │   ├── ResetRejectedError      the engine refused a reset (nothing changed)
    │   ├── WorkflowQuarantinedError  the engine cannot read the run's state (dead-lettered)
    │   ├── WorkflowFailureError    the run failed; carries the recorded Failure
    │   │   ├── WorkflowTerminatedError   it was terminated (the reason is the message)
    │   │   └── WorkflowTimedOutError     its run or execution timeout passed
    │   ├── WorkflowCanceledError   the run ended canceled
    │   ├── WorkflowContinuedAsNewError  the run continued as a new run (``new_run_id``)
    │   ├── QueryFailedError        a query handler raised, or is unknown
    │   └── WorkflowUpdateFailedError  an update was rejected by its validator, or its handler raised
    ├── ActivityExecutionError      a standalone activity's operation or outcome (``activity_id``)
    │   ├── ActivityAlreadyStartedError  an open run has this ID (carries its run ID)
    │   ├── ActivityNotFoundError   no standalone activity has this ID
    │   └── ActivityFailedError     it failed, timed out, was canceled or terminated (``status``)
    ├── ScheduleError               a schedule operation did not succeed (``schedule_id``)
    │   ├── ScheduleAlreadyRunningError  a schedule with this ID exists
    │   └── ScheduleNotFoundError   no schedule with this ID (or it was deleted)
    ├── FailureError                a failure a workflow raises and catches: fails the run, not its task
    │   └── ApplicationError        raised by user code; may be marked non-retryable
    │       ├── ActivityError       an activity failed; the cause is on ``__cause__``
    │       └── ChildWorkflowError  a child workflow failed, was canceled or could not start
    ├── NonDeterminismError         workflow code no longer matches its history
    ├── NotDeterministicError       workflow code reached the clock, threads or I/O directly
    ├── DefinitionError             a bad @workflow.defn / @activity.defn
    ├── WorkerCrashedError          a worker stopped because one of its task consumers died
    ├── WorkflowTaskFailedError     a run's workflow task keeps failing (result() names the cause)
    ├── ActivityNotCurrentError     an async completion for an attempt that is no longer current
    └── ActivityAttemptLimitError   kadence.testing: an activity went past the environment's attempt limit
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ActivityAlreadyStartedError",
    "ActivityAttemptLimitError",
    "ActivityError",
    "ActivityExecutionError",
    "ActivityFailedError",
    "ActivityNotCurrentError",
    "ActivityNotFoundError",
    "ApplicationError",
    "ArchiveError",
    "BrokerUnavailableError",
    "ChildWorkflowError",
    "CommandRejectedError",
    "ConfigError",
    "DefinitionError",
    "FailureError",
    "IncompatibleSchemaError",
    "InvalidArgumentError",
    "InvalidIdentifierError",
    "InvalidQueryError",
    "KadenceError",
    "KafkaAuthenticationError",
    "KafkaAuthorizationError",
    "NoReplyError",
    "NonDeterminismError",
    "NotDeterministicError",
    "PartitionMismatchError",
    "PayloadTooLargeError",
    "PayloadTypeError",
    "ProjectionError",
    "QueryFailedError",
    "ResetRejectedError",
    "ScheduleAlreadyRunningError",
    "ScheduleError",
    "ScheduleNotFoundError",
    "SchemaError",
    "SchemaNotRegisteredError",
    "SchemaRegistryAccessError",
    "SchemaRegistryError",
    "SchemaRegistryUnavailableError",
    "TopicError",
    "WorkerCrashedError",
    "WorkflowAlreadyStartedError",
    "WorkflowCanceledError",
    "WorkflowContinuedAsNewError",
    "WorkflowError",
    "WorkflowFailureError",
    "WorkflowNotFoundError",
    "WorkflowQuarantinedError",
    "WorkflowTaskFailedError",
    "WorkflowTerminatedError",
    "WorkflowTimedOutError",
    "WorkflowUpdateFailedError",
    "WrongPartitionError",
]


class KadenceError(Exception):
    """Root of every error Kadence raises."""


class ConfigError(KadenceError):
    """Configuration is missing or invalid."""


class KafkaAuthenticationError(ConfigError):
    """The brokers refused this client: a wrong SASL user or password, or a TLS handshake that
    failed (a CA that did not sign the brokers' certificates, a client certificate they do not
    trust or that expired). Raised where a broker that does not answer would otherwise be
    reported, so that nobody waits for an outage that is not one; retrying does not help."""


class KafkaAuthorizationError(ConfigError):
    """The brokers' ACLs do not allow an operation this client needs; the message names the
    principal, the resource and the ACL to grant (docs/deploy.md, "ACLs")."""


class SchemaError(KadenceError):
    """A record could not be encoded or decoded with the known schemas."""


class PayloadTypeError(SchemaError):
    """A payload does not match the type hint of the function that receives or returns it
    (``kadence.topics.typed``): a workflow's or activity's argument, a signal's, a query's, or a
    result. ``field`` names the argument (or ``result``); the message names each bad field's path,
    never its value. An activity or workflow that gets it fails without retries: the same input
    would fail the same way."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class SchemaRegistryError(KadenceError):
    """Root of the errors of the schema registry (``KADENCE_SCHEMA_REGISTRY_URL``, decision 0056)."""


class SchemaRegistryUnavailableError(SchemaRegistryError):
    """The schema registry did not answer (after a few tries): a record in the Confluent wire
    format can be neither written nor read until it does. Nothing is dead-lettered or written in
    another format instead; the caller retries (the processor aborts its batch and reads it again)."""


class SchemaNotRegisteredError(SchemaRegistryError, ConfigError):
    """A topic's subject in the schema registry lacks the schema this release writes (or a record
    names a schema ID the registry does not have): run ``kadence topics apply`` with the registry
    configured, which registers them."""


class SchemaRegistryAccessError(SchemaRegistryError, ConfigError):
    """The schema registry refused this client's credentials or an operation (HTTP 401 or 403);
    retrying does not help."""


class IncompatibleSchemaError(SchemaRegistryError, SchemaError):
    """The schema registry refused a schema as incompatible with the subject's earlier versions
    under its compatibility rule (``BACKWARD_TRANSITIVE``)."""


class TopicError(KadenceError):
    """The topic catalogue could not be applied or read."""


class PartitionMismatchError(TopicError):
    """An existing topic's partition count differs from the catalogue's."""

    def __init__(self, topic: str, expected: int, actual: int) -> None:
        super().__init__(
            f"topic {topic!r} has {actual} partitions, the catalogue asks for {expected}; "
            "workflow IDs hash to partitions for ever, so the count of commands/history/state "
            "cannot change after a namespace is created (create a new namespace instead)"
        )
        self.topic, self.expected, self.actual = topic, expected, actual


class BrokerUnavailableError(KadenceError):
    """Kafka did not answer in time."""


class NoReplyError(BrokerUnavailableError):
    """Kafka acknowledged the command, and no reply came in time: the broker works, the engine
    did not answer (no history processor running, one far behind, or, for a result request, a
    run still open). A subclass of ``BrokerUnavailableError``, so code that catches that goes on
    working; catch this to tell a stopped processor from a dead broker."""


class InvalidQueryError(KadenceError):
    """A projection query (list / count filter, page size, cursor) is invalid; nothing was read."""


class ProjectionError(KadenceError):
    """A projection operation (rebuild) cannot run; nothing was switched."""


class ArchiveError(KadenceError):
    """An archived history could not be written, read or verified (``kadence.topics.archive``)."""


class WorkflowError(KadenceError):
    """An operation on a workflow execution did not succeed. ``engine_message``: the engine's own
    words, when the error stands for its reply (``topics.protocol.refusal``)."""

    def __init__(
        self, message: str, *, workflow_id: str | None = None, run_id: str | None = None, engine_message: str = ""
    ) -> None:
        super().__init__(message)
        self.workflow_id, self.run_id = workflow_id, run_id
        self.engine_message = engine_message


class CommandRejectedError(WorkflowError):
    """The engine refused a command: a signal, cancel, terminate or pause of a run that is not
    running, a start its checks refused, ... The message says why; nothing changed."""


class WorkflowAlreadyStartedError(WorkflowError):
    """A run with this workflow ID is already open (or the reuse policy forbids a new one)."""


class ActivityExecutionError(KadenceError):
    """An operation on a standalone activity (``Client.start_activity``) did not succeed, or its
    outcome is not a result. ``activity_id`` and ``run_id`` name it; ``engine_message`` is the
    engine's own words, when the error stands for its reply."""

    def __init__(
        self, message: str, *, activity_id: str | None = None, run_id: str | None = None, engine_message: str = ""
    ) -> None:
        super().__init__(message)
        self.activity_id, self.run_id = activity_id, run_id
        self.engine_message = engine_message


class ActivityAlreadyStartedError(ActivityExecutionError):
    """A run with this activity ID is open (``id_conflict_policy="fail"``), or the reuse policy
    forbids a new one after the closed one; ``run_id`` is that run's."""


class ActivityNotFoundError(ActivityExecutionError):
    """No standalone activity with this ID (or run ID) exists."""


class ActivityFailedError(ActivityExecutionError):
    """The standalone activity did not complete: ``status`` is ``failed``, ``timed_out``,
    ``canceled`` or ``terminated``; ``failure`` the recorded Failure and ``__cause__`` the
    activity's own error, rebuilt."""

    def __init__(self, message: str, *, status: str = "", failure: dict[str, Any] | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.status, self.failure = status, failure


class ScheduleError(KadenceError):
    """A schedule operation did not succeed; ``schedule_id`` names the schedule."""

    def __init__(self, message: str, *, schedule_id: str | None = None) -> None:
        super().__init__(message)
        self.schedule_id = schedule_id


class ScheduleAlreadyRunningError(ScheduleError):
    """A schedule with this ID exists (delete it first, or update it)."""


class ScheduleNotFoundError(ScheduleError):
    """No schedule with this ID exists, or it was deleted."""


class PayloadTooLargeError(KadenceError):
    """A command (its payloads and envelope) is larger than the Kafka producer's
    ``message.max.bytes``; it was refused before anything was written. ``size`` and ``limit`` in
    bytes when known."""

    def __init__(self, message: str, *, size: int | None = None, limit: int | None = None) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit


class InvalidArgumentError(KadenceError):
    """An argument that can never be valid (a cron schedule that does not parse, a search
    attribute of a type that has none); nothing was sent. ``field`` names the argument."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class InvalidIdentifierError(InvalidArgumentError):
    """A workflow ID, task queue or workflow/signal/query/activity name that is empty, too long,
    holds a control character, or (a name) a ``/`` (``kadence.topics.identifiers``), or a search
    attribute that is not of a searchable type (``kadence.topics.search_attributes``); nothing was
    sent. ``field`` names the argument."""


class WrongPartitionError(KadenceError):
    """A command was read from a partition its key (the workflow ID) does not hash to with Kafka's
    default partitioner (murmur2). The engine dead-letters it instead of creating a workflow the
    rest of the system cannot find; ``expected_partition`` is where it belongs."""

    def __init__(self, message: str, *, expected_partition: int | None = None, partition: int | None = None) -> None:
        super().__init__(message)
        self.expected_partition = expected_partition
        self.partition = partition


class WorkflowQuarantinedError(WorkflowError):
    """The engine cannot read this workflow's stored state or history: a record it cannot decode
    (written by a newer schema version than the processor knows, or damaged). The command was
    not applied; the processor dead-lettered it (``kadence dead-letters list``), so it can be
    redriven once a processor that reads the record owns the shard. The message names the
    record's topic, partition and offset. Other workflows are not affected."""


class WorkflowNotFoundError(WorkflowError):
    """No execution with this workflow ID (or run ID) exists."""


class WorkflowContinuedAsNewError(WorkflowError):
    """``result(follow_runs=False)`` of a run that continued as new: it has no result of its own;
    ``new_run_id`` names the run that carries on."""

    def __init__(self, message: str, *, new_run_id: str | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.new_run_id = new_run_id


class WorkflowFailureError(WorkflowError):
    """The workflow run ended in failure; ``failure`` holds the recorded Failure dict and
    ``__cause__`` the rebuilt exception chain."""

    def __init__(self, message: str, *, failure: dict[str, Any] | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.failure = failure


class WorkflowTerminatedError(WorkflowFailureError):
    """The workflow run was terminated (``kadence terminate``, the gateway, a parent-close
    policy); ``reason`` is what the terminator gave."""

    def __init__(self, message: str, *, reason: str = "", **kw: Any) -> None:
        super().__init__(message, **kw)
        self.reason = reason


class WorkflowTimedOutError(WorkflowFailureError):
    """The workflow run's run timeout or the execution timeout passed before it closed."""


class WorkflowCanceledError(WorkflowError):
    """The workflow run ended canceled (after a cancellation request)."""


class QueryFailedError(WorkflowError):
    """A query could not be answered (unknown query name, the handler raised, workflow closed)."""


class ResetRejectedError(WorkflowError):
    """The engine refused a reset (or, for a dry run, would refuse it): the message says why
    (the run is a closed child, the point is not a completed workflow task, a child was started
    before it, ...). Nothing changed."""


class WorkflowUpdateFailedError(WorkflowError):
    """An update did not return a result: ``rejected`` (its validator raised, the update is
    unknown, its arguments do not match; nothing was recorded) or it failed (its handler raised,
    or the run closed before it finished). ``failure`` holds the Failure dict and ``__cause__``
    the rebuilt exception (a registered class is raised as itself)."""

    def __init__(
        self,
        message: str,
        *,
        update_name: str = "",
        rejected: bool = False,
        failure: dict[str, Any] | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(message, **kw)
        self.update_name = update_name
        self.rejected = rejected
        self.failure = failure


class FailureError(KadenceError):
    """The base of the failures a workflow raises and catches on purpose (Temporal's
    ``FailureError``). Raised out of a workflow's run method, a ``FailureError`` (or a type the
    workflow or worker declares in ``failure_exception_types``) fails the run; any other exception
    is taken for a bug: it fails the workflow *task*, and the run waits, retried with backoff,
    for fixed code."""


class ApplicationError(FailureError):
    """An error raised by workflow or activity code on purpose.

    ``non_retryable=True`` tells the engine not to retry the activity that raised it.
    ``type`` names the error for retry policies (defaults to the class name).
    """

    def __init__(self, message: str, *details: Any, type: str | None = None, non_retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        self.type = type or self.__class__.__name__
        self.non_retryable = non_retryable


class ActivityError(ApplicationError):
    """An activity failed (after its retries); the activity's own error is ``__cause__``."""

    def __init__(
        self,
        message: str,
        *,
        activity_type: str = "",
        activity_id: str = "",
        attempt: int = 0,
        failure: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message, type="ActivityError")
        self.activity_type, self.activity_id, self.attempt = activity_type, activity_id, attempt
        self.failure = failure


class ChildWorkflowError(ApplicationError):
    """A child workflow did not complete (failed, canceled, terminated, timed out, or could not
    start); the child's own failure is ``__cause__``."""

    def __init__(
        self,
        message: str,
        *,
        workflow_id: str = "",
        run_id: str | None = None,
        status: str = "",
        failure: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message, type="ChildWorkflowError")
        self.workflow_id, self.run_id, self.status, self.failure = workflow_id, run_id, status, failure


class NonDeterminismError(KadenceError):
    """Workflow code produced commands that differ from the recorded history."""


class NotDeterministicError(KadenceError):
    """Workflow code reached something that is not replay-safe (threads, sockets, subprocesses)."""


class DefinitionError(KadenceError):
    """A workflow or activity definition is invalid."""


class WorkerCrashedError(KadenceError):
    """A worker's task consumer ended on an error; ``Worker.run()`` stopped and raises this
    (the cause is in the message and in the worker's log)."""


class WorkflowTaskFailedError(KadenceError):
    """The workflow's workflow task fails (its code raised outside the workflow's own failure
    path, did not replay its history, or a worker cannot decode its payloads). The real engine
    keeps the run open and retries the task until fixed code or configuration is deployed; a
    client's ``result()`` that did not get the result in time raises this, with the cause, when
    the run is stuck that way. ``kadence.testing`` stops running the workflow and raises this
    from the calls that wait on it. ``cause`` is the engine's cause
    (``workflow_error``: its code raised something not a ``FailureError``; ``non_determinism``,
    ``nondeterministic_call``, ``worker_error``, ``unknown_workflow_type``);
    the original exception is ``__cause__``."""

    def __init__(self, message: str, *, workflow_id: str, cause: str) -> None:
        super().__init__(message)
        self.workflow_id = workflow_id
        self.cause = cause


class ActivityAttemptLimitError(KadenceError):
    """``kadence.testing`` stopped waiting for a workflow one of whose activities reached the
    environment's ``max_activity_attempts``: under the virtual clock, an activity that fails every
    attempt with no end to its retry policy would otherwise retry for ever at full speed."""

    def __init__(self, message: str, *, workflow_id: str, activity_type: str, attempt: int) -> None:
        super().__init__(message)
        self.workflow_id = workflow_id
        self.activity_type = activity_type
        self.attempt = attempt


class ActivityNotCurrentError(KadenceError):
    """An async activity completion (``AsyncActivityHandle``) for an attempt that is no longer
    current: it completed, failed or timed out already, a later attempt runs, or the run closed.
    The engine recorded nothing for it."""
