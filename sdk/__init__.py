"""Kadence: durable workflows as ordinary async Python, with Kafka as the source of truth.

``import kadence`` is the SDK::

    from kadence import workflow, activity, Client, Worker, RetryPolicy

The engine (``kadence.processors``), the HTTP gateway (``kadence.gateway``), projections
(``kadence.connectors``) and the shared Kafka layer (``kadence.topics``) live beside it.
"""

from kadence.topics.errors import (ActivityError, ChildWorkflowError, ApplicationError, BrokerUnavailableError, ConfigError,
                                   NoReplyError,
                                   DefinitionError, KadenceError, NonDeterminismError, SchemaError,
                                   WorkflowAlreadyStartedError, WorkflowError, WorkflowFailureError,
                                   WorkflowNotFoundError, WorkflowCanceledError, QueryFailedError,
                                   WorkflowContinuedAsNewError, WrongPartitionError, WorkflowQuarantinedError,
                                   PayloadTooLargeError,
                                   InvalidIdentifierError, WorkerCrashedError, WorkflowTerminatedError,
                                   WorkflowTimedOutError, PayloadTypeError, WorkflowTaskFailedError,
                                   WorkflowUpdateFailedError, ResetRejectedError)
from kadence.topics.config import KafkaConfig

from . import activity, workflow
from ._client import Client, ResetPlan, WorkflowHandle
from ._definitions import RetryPolicy
from ._loop import NotDeterministicError
from ._replayer import Replayer, ReplayResult
from ._worker import Worker

__version__ = "0.1.0"

__all__ = [
    "workflow", "activity", "Client", "WorkflowHandle", "Worker", "RetryPolicy", "KafkaConfig",
    "KadenceError", "ConfigError", "SchemaError", "BrokerUnavailableError", "NoReplyError", "WorkflowError",
    "WorkflowAlreadyStartedError", "WorkflowNotFoundError", "WorkflowFailureError", "ApplicationError",
    "ActivityError", "NonDeterminismError", "DefinitionError", "NotDeterministicError",
    "WorkflowCanceledError", "QueryFailedError", "Replayer", "ReplayResult", "ChildWorkflowError",
    "WorkflowContinuedAsNewError", "WrongPartitionError", "WorkflowQuarantinedError", "PayloadTooLargeError", "InvalidIdentifierError",
    "WorkerCrashedError", "WorkflowTerminatedError", "WorkflowTimedOutError", "PayloadTypeError",
    "WorkflowTaskFailedError", "WorkflowUpdateFailedError", "ResetRejectedError", "ResetPlan",
]
