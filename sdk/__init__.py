"""Kadence: durable workflows as ordinary async Python, with Kafka as the source of truth.

``import kadence`` is the SDK::

    from kadence import workflow, activity, Client, Worker, RetryPolicy

The engine (``kadence.processors``), the HTTP gateway (``kadence.gateway``), projections
(``kadence.connectors``) and the shared Kafka layer (``kadence.topics``) live beside it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: name -> the module it comes from ("": the submodule of that name). Imported on first use
#: (PEP 562), so that a program that needs one part (the CLI talking to the gateway, a worker
#: process) does not pay for all of them: ``import kadence`` alone took about 200 ms.
_FROM = {
    "ActivityAlreadyStartedError": "kadence.topics.errors",
    "ActivityAttemptLimitError": "kadence.topics.errors",
    "ActivityError": "kadence.topics.errors",
    "ActivityExecutionError": "kadence.topics.errors",
    "ActivityFailedError": "kadence.topics.errors",
    "ActivityHandle": "kadence._standalone",
    "ActivityNotCurrentError": "kadence.topics.errors",
    "ActivityNotFoundError": "kadence.topics.errors",
    "ApplicationError": "kadence.topics.errors",
    "AsyncActivityHandle": "kadence.topics.async_completion",
    "BrokerUnavailableError": "kadence.topics.errors",
    "ChildWorkflowError": "kadence.topics.errors",
    "Client": "kadence._client",
    "CommandRejectedError": "kadence.topics.errors",
    "ConfigError": "kadence.topics.errors",
    "DefinitionError": "kadence.topics.errors",
    "FailureError": "kadence.topics.errors",
    "InvalidArgumentError": "kadence.topics.errors",
    "InvalidIdentifierError": "kadence.topics.errors",
    "KadenceError": "kadence.topics.errors",
    "KafkaAuthenticationError": "kadence.topics.errors",
    "KafkaAuthorizationError": "kadence.topics.errors",
    "KafkaConfig": "kadence.topics.config",
    "Limit": "kadence._definitions",
    "NoReplyError": "kadence.topics.errors",
    "NonDeterminismError": "kadence.topics.errors",
    "NotDeterministicError": "kadence._loop",
    "PayloadTooLargeError": "kadence.topics.errors",
    "PayloadTypeError": "kadence.topics.errors",
    "PendingActivityDescription": "kadence._description",
    "Priority": "kadence._definitions",
    "QueryFailedError": "kadence.topics.errors",
    "ReplayResult": "kadence._replayer",
    "Replayer": "kadence._replayer",
    "ResetPlan": "kadence._client",
    "ResetRejectedError": "kadence.topics.errors",
    "RetryPolicy": "kadence._definitions",
    "ScheduleAction": "kadence.topics.schedules",
    "ScheduleAlreadyRunningError": "kadence.topics.errors",
    "ScheduleCalendar": "kadence.topics.schedules",
    "ScheduleDescription": "kadence.topics.schedules",
    "ScheduleError": "kadence.topics.errors",
    "ScheduleHandle": "kadence._schedules",
    "ScheduleInterval": "kadence.topics.schedules",
    "ScheduleNotFoundError": "kadence.topics.errors",
    "SchedulePolicy": "kadence.topics.schedules",
    "ScheduleSpec": "kadence.topics.schedules",
    "SchemaError": "kadence.topics.errors",
    "SchemaNotRegisteredError": "kadence.topics.errors",
    "SchemaRegistryError": "kadence.topics.errors",
    "SchemaRegistryUnavailableError": "kadence.topics.errors",
    "StreamEvent": "kadence._streams",
    "Worker": "kadence._worker",
    "WorkerCrashedError": "kadence.topics.errors",
    "WorkflowAlreadyStartedError": "kadence.topics.errors",
    "WorkflowCanceledError": "kadence.topics.errors",
    "WorkflowContinuedAsNewError": "kadence.topics.errors",
    "WorkflowError": "kadence.topics.errors",
    "WorkflowExecutionDescription": "kadence._description",
    "WorkflowExecutionStatus": "kadence._description",
    "WorkflowFailureError": "kadence.topics.errors",
    "WorkflowHandle": "kadence._client",
    "WorkflowNotFoundError": "kadence.topics.errors",
    "WorkflowQuarantinedError": "kadence.topics.errors",
    "WorkflowStream": "kadence._streams",
    "WorkflowTaskFailedError": "kadence.topics.errors",
    "WorkflowTerminatedError": "kadence.topics.errors",
    "WorkflowTimedOutError": "kadence.topics.errors",
    "WorkflowUpdateFailedError": "kadence.topics.errors",
    "WorkflowUpdateHandle": "kadence._updates",
    "WorkflowUpdateStage": "kadence._updates",
    "WrongPartitionError": "kadence.topics.errors",
    "activity": "",
    "schedule_action": "kadence._schedules",
    "workflow": "",
}


def __getattr__(name: str) -> Any:
    where = _FROM.get(name)
    if where is None:
        raise AttributeError(f"module 'kadence' has no attribute {name!r}")
    value = importlib.import_module(f"kadence.{name}") if where == "" else getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # what type checkers and IDEs see: the same names, imported eagerly
    from kadence.topics.async_completion import AsyncActivityHandle
    from kadence.topics.config import KafkaConfig
    from kadence.topics.errors import (
        ActivityAlreadyStartedError,
        ActivityAttemptLimitError,
        ActivityError,
        ActivityExecutionError,
        ActivityFailedError,
        ActivityNotCurrentError,
        ActivityNotFoundError,
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
        ScheduleAlreadyRunningError,
        ScheduleError,
        ScheduleNotFoundError,
        SchemaError,
        SchemaNotRegisteredError,
        SchemaRegistryError,
        SchemaRegistryUnavailableError,
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
    from kadence.topics.schedules import (
        ScheduleAction,
        ScheduleCalendar,
        ScheduleDescription,
        ScheduleInterval,
        SchedulePolicy,
        ScheduleSpec,
    )

    from . import activity, workflow
    from ._client import Client, ResetPlan, WorkflowHandle
    from ._definitions import Limit, Priority, RetryPolicy
    from ._description import PendingActivityDescription, WorkflowExecutionDescription, WorkflowExecutionStatus
    from ._loop import NotDeterministicError
    from ._replayer import Replayer, ReplayResult
    from ._schedules import ScheduleHandle, schedule_action
    from ._standalone import ActivityHandle
    from ._streams import StreamEvent, WorkflowStream
    from ._updates import WorkflowUpdateHandle, WorkflowUpdateStage
    from ._worker import Worker

__all__ = [
    "ActivityAlreadyStartedError",
    "ActivityAttemptLimitError",
    "ActivityError",
    "ActivityExecutionError",
    "ActivityFailedError",
    "ActivityHandle",
    "ActivityNotCurrentError",
    "ActivityNotFoundError",
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
    "Limit",
    "NoReplyError",
    "NonDeterminismError",
    "NotDeterministicError",
    "PayloadTooLargeError",
    "PayloadTypeError",
    "PendingActivityDescription",
    "Priority",
    "QueryFailedError",
    "ReplayResult",
    "Replayer",
    "ResetPlan",
    "ResetRejectedError",
    "RetryPolicy",
    "ScheduleAction",
    "ScheduleAlreadyRunningError",
    "ScheduleCalendar",
    "ScheduleDescription",
    "ScheduleError",
    "ScheduleHandle",
    "ScheduleInterval",
    "ScheduleNotFoundError",
    "SchedulePolicy",
    "ScheduleSpec",
    "SchemaError",
    "SchemaNotRegisteredError",
    "SchemaRegistryError",
    "SchemaRegistryUnavailableError",
    "StreamEvent",
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
    "WorkflowStream",
    "WorkflowTaskFailedError",
    "WorkflowTerminatedError",
    "WorkflowTimedOutError",
    "WorkflowUpdateFailedError",
    "WorkflowUpdateHandle",
    "WorkflowUpdateStage",
    "WrongPartitionError",
    "activity",
    "schedule_action",
    "workflow",
]
