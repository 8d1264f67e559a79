"""The public names of each package are locked: adding or removing one is a deliberate change
to this file, not an accident of a refactoring."""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    # the SDK: what users import (`from kadence import workflow, activity, Client, Worker`)
    "kadence": [
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
    ],
    "kadence.topics": [
        "ActivityAlreadyStartedError",
        "ActivityAttemptLimitError",
        "ActivityError",
        "ActivityExecutionError",
        "ActivityFailedError",
        "ActivityNotCurrentError",
        "ActivityNotFoundError",
        "ApplicationError",
        "ApplyReport",
        "ArchiveError",
        "BrokerUnavailableError",
        "Catalogue",
        "ChildWorkflowError",
        "Codec",
        "CommandRejectedError",
        "ConfigError",
        "DefinitionError",
        "EngineClient",
        "FailureError",
        "IncompatibleSchemaError",
        "InvalidArgumentError",
        "InvalidIdentifierError",
        "InvalidQueryError",
        "JsonConverter",
        "KadenceError",
        "KafkaAuthenticationError",
        "KafkaAuthorizationError",
        "KafkaConfig",
        "LargePayloadConfig",
        "LargePayloads",
        "NoReplyError",
        "NonDeterminismError",
        "NotDeterministicError",
        "PartitionMismatchError",
        "PayloadCodec",
        "PayloadConverter",
        "PayloadTooLargeError",
        "PayloadTypeError",
        "ProjectionError",
        "QueryFailedError",
        "QueueLimit",
        "ResetRejectedError",
        "ScheduleAlreadyRunningError",
        "ScheduleError",
        "ScheduleNotFoundError",
        "SchemaError",
        "SchemaNotRegisteredError",
        "SchemaRegistryAccessError",
        "SchemaRegistryError",
        "SchemaRegistryUnavailableError",
        "TIMER_TIERS_MS",
        "TopicError",
        "TopicSpec",
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
        "codec",
        "decode",
        "encode",
        "exception_from_failure",
        "failure_from_exception",
        "murmur2",
        "partition_for",
    ],
    # the Redis projections' readers (docs/projections.md)
    "kadence.readmodels": [
        "HistoryPage",
        "HistoryReadModel",
        "ProjectionKeys",
        "VisibilityFilter",
        "VisibilityReader",
        "projection_lag",
    ],
    # the archive and payload stores (docs/archival.md, docs/guide.md "Large payloads")
    "kadence.storage": ["LocalArchiveStore", "S3ArchiveStore", "open_large_payloads", "open_store"],
    "kadence.gateway": [
        "ApiKey",
        "ApiKeyStore",
        "ConsistencyToken",
        "GatewayConfig",
        "RateLimit",
        "ReadYourWrites",
        "create_app",
    ],
    "kadence.processors": [
        "BatchView",
        "DiskShardStore",
        "HistoryProcessor",
        "MemoryShardStore",
        "Outbox",
        "ProcessorConfig",
        "ShardStore",
        "TimerConfig",
        "TimerService",
        "choose_tier",
        "restore_shard",
        "transition",
    ],
    # code around client calls, activities and workflow handlers (docs/guide.md, "Interceptors")
    "kadence.interceptors": ["ActivityCall", "ClientCall", "Interceptor", "WorkflowCall"],
    # the users' test kit (docs/testing.md)
    "kadence.testing": [
        "ActivityAttemptLimitError",
        "PartitionProbes",
        "WorkflowEnvironment",
        "WorkflowTaskFailedError",
    ],
}


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_all_is_locked(package):
    module = importlib.import_module(package)
    assert PUBLIC[package] == sorted(PUBLIC[package]), "keep the locked list sorted"
    actual = sorted(module.__all__)
    added, removed = sorted(set(actual) - set(PUBLIC[package])), sorted(set(PUBLIC[package]) - set(actual))
    assert actual == PUBLIC[package], (
        f"{package}.__all__ changed (added {added}, removed {removed}); if that is intended, update "
        f"PUBLIC[{package!r}] in tests/unit/test_public_api.py"
    )


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_every_public_name_exists_once(package):
    module = importlib.import_module(package)
    assert len(module.__all__) == len(set(module.__all__)), f"{package}.__all__ lists a name twice"
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == [], f"{package}.__all__ names what it does not define: {missing}"
    namespace: dict = {}
    exec(f"from {package} import *", namespace)  # noqa: S102 - star-import uses __all__
    assert set(PUBLIC[package]) <= set(namespace)


def test_the_sdk_and_topics_share_one_error_tree():
    """`except kadence.WorkflowNotFoundError` must catch what kadence.topics raises."""
    import kadence
    import kadence.topics

    shared = set(PUBLIC["kadence"]) & set(PUBLIC["kadence.topics"])
    assert {"KadenceError", "SchemaError", "WorkflowNotFoundError", "KafkaConfig"} <= shared
    for name in shared:
        assert getattr(kadence, name) is getattr(kadence.topics, name), name
    for name in PUBLIC["kadence"]:
        obj = getattr(kadence, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, kadence.KadenceError), f"kadence.{name} is not a KadenceError"
