"""Kadence: durable workflows as ordinary async Python, with Kafka as the source of truth.

``import kadence`` is the SDK::

    from kadence import workflow, activity, Client, Worker, RetryPolicy

The engine (``kadence.processors``), the HTTP gateway (``kadence.gateway``), projections
(``kadence.connectors``) and the shared Kafka layer (``kadence.topics``) live beside it.
"""

from kadence.topics.async_completion import AsyncActivityHandle
from kadence.topics.config import KafkaConfig
from kadence.topics.errors import (
    ActivityAttemptLimitError,
    ActivityError,
    ActivityNotCurrentError,
    ApplicationError,
    BrokerUnavailableError,
    ChildWorkflowError,
    CommandRejectedError,
    ConfigError,
    DefinitionError,
    FailureError,
    InvalidArgumentError,
    InvalidIdentifierError,
    KadenceError,
    KafkaAuthenticationError,
    KafkaAuthorizationError,
    NonDeterminismError,
    NoReplyError,
    PayloadTooLargeError,
    PayloadTypeError,
    QueryFailedError,
    ResetRejectedError,
    SchemaError,
    WorkerCrashedError,
    WorkflowAlreadyStartedError,
    WorkflowCanceledError,
    WorkflowContinuedAsNewError,
    WorkflowError,
    WorkflowFailureError,
    WorkflowNotFoundError,
    WorkflowQuarantinedError,
    WorkflowTaskFailedError,
    WorkflowTerminatedError,
    WorkflowTimedOutError,
    WorkflowUpdateFailedError,
    WrongPartitionError,
)

from . import activity, workflow
from ._client import Client, ResetPlan, WorkflowHandle
from ._definitions import RetryPolicy
from ._description import PendingActivityDescription, WorkflowExecutionDescription, WorkflowExecutionStatus
from ._loop import NotDeterministicError
from ._replayer import Replayer, ReplayResult
from ._updates import WorkflowUpdateHandle, WorkflowUpdateStage
from ._worker import Worker

__version__ = "0.1.0"

__all__ = [
    "ActivityAttemptLimitError",
    "ActivityError",
    "ActivityNotCurrentError",
    "ApplicationError",
    "AsyncActivityHandle",
    "BrokerUnavailableError",
    "ChildWorkflowError",
    "Client",
    "CommandRejectedError",
    "ConfigError",
    "DefinitionError",
    "FailureError",
    "InvalidArgumentError",
    "InvalidIdentifierError",
    "KadenceError",
    "KafkaAuthenticationError",
    "KafkaAuthorizationError",
    "KafkaConfig",
    "NoReplyError",
    "NonDeterminismError",
    "NotDeterministicError",
    "PayloadTooLargeError",
    "PayloadTypeError",
    "PendingActivityDescription",
    "QueryFailedError",
    "ReplayResult",
    "Replayer",
    "ResetPlan",
    "ResetRejectedError",
    "RetryPolicy",
    "SchemaError",
    "Worker",
    "WorkerCrashedError",
    "WorkflowAlreadyStartedError",
    "WorkflowCanceledError",
    "WorkflowContinuedAsNewError",
    "WorkflowError",
    "WorkflowExecutionDescription",
    "WorkflowExecutionStatus",
    "WorkflowFailureError",
    "WorkflowHandle",
    "WorkflowNotFoundError",
    "WorkflowQuarantinedError",
    "WorkflowTaskFailedError",
    "WorkflowTerminatedError",
    "WorkflowTimedOutError",
    "WorkflowUpdateFailedError",
    "WorkflowUpdateHandle",
    "WorkflowUpdateStage",
    "WrongPartitionError",
    "activity",
    "workflow",
]
