"""A history processor's settings (``ProcessorConfig``), the consumer settings of its group
protocol, and the claim on its state directory."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kadence.topics import settings
from kadence.topics.config import KafkaConfig
from kadence.topics.errors import ConfigError
from kadence.topics.settings import session_timeout_setting, setting

from .task_retry import WorkflowTaskRetry

__all__ = ["ProcessorConfig", "claim_state_dir", "group_membership"]


@dataclass(frozen=True, kw_only=True)
class ProcessorConfig:
    """A history processor's settings: each read from its environment variable by ``from_env``
    and offered as a ``kadence processor`` option (``topics.settings``)."""

    kafka: KafkaConfig
    instance_id: str = setting(
        default_factory=socket.gethostname,
        env="KADENCE_PROCESSOR_ID",
        help="stable per instance slot; names the transactional ID, so a restarted instance fences "
        "its predecessor (and aborts its open transaction) at once, and the group member; default: host name",
    )
    max_batch: int = setting(500, env="KADENCE_PROCESSOR_MAX_BATCH", help="most commands in one transaction")
    task_max_bytes: int = setting(
        512 * 1024,
        env="KADENCE_PROCESSOR_TASK_MAX_BYTES",
        help="a workflow task record that would be larger (a long history a worker must replay, a "
        "burst of signals) goes without its events, and the worker reads them from the history "
        "topic: no record may exceed Kafka's message size limit (message.max.bytes, 1 MB by default)",
    )
    transaction_timeout_ms: int = setting(
        10_000, env="KADENCE_TXN_TIMEOUT_MS", help="how long a dead instance's open transaction can block its shards"
    )
    session_timeout_ms: int = session_timeout_setting()
    heartbeat_interval_ms: int = setting(
        3_000,
        env="KADENCE_PROCESSOR_HEARTBEAT_MS",
        help="how often the instance heartbeats to its group (classic protocol): a rebalance reaches "
        "it at its next heartbeat, so this bounds how long moved shards wait in a restart",
    )
    group_protocol: str = setting(
        "classic",
        env="KADENCE_PROCESSOR_GROUP_PROTOCOL",
        help='"classic" (cooperative-sticky, the default) or "consumer" (KIP-848, Kafka 4.0+ brokers: '
        "the session timeout is then the broker's group.consumer.session.timeout.ms; decision 0050)",
    )
    store: str = setting(
        "disk",
        env="KADENCE_PROCESSOR_STORE",
        help='"disk" (RocksDB, bounded memory) or "memory" (dicts, decision 0002)',
    )
    state_dir: str | None = setting(
        None,
        env="KADENCE_STATE_DIR",
        help="where the disk store keeps its per-partition databases (rebuilt from Kafka on every "
        "assignment, so nothing there needs a backup); default: a fresh temp dir",
    )
    build_backlog_interval_s: float = setting(
        15.0, env="KADENCE_BUILD_BACKLOG_INTERVAL_S", help="how often the build backlog gauges are measured (0: never)"
    )
    txn_stall_exit_s: float = setting(
        180.0,
        env="KADENCE_TXN_STALL_EXIT_S",
        help="a batch's transaction (with its abort and retry) blocked longer than this ends the "
        "process with status 75 (librdkafka can block for ever)",
    )
    workflow_task_retry_initial_ms: int = setting(
        1_000,
        env="KADENCE_WORKFLOW_TASK_RETRY_INITIAL_MS",
        help="a failed workflow task (a bug in workflow code, non-determinism) is retried after "
        "this long, doubling each attempt, for as long as the run is open",
    )
    workflow_task_retry_max_ms: int = setting(
        600_000,
        env="KADENCE_WORKFLOW_TASK_RETRY_MAX_MS",
        help="the cap of that backoff: fixed code deployed at any time resumes a stuck run within this",
    )
    txn_hang_s: float = setting(
        4.0,
        env="KADENCE_TXN_HANG_S",
        help="a send_offsets_to_transaction that has not returned after this long is given up: the "
        "producer is replaced and the batch read again (the allowance doubles after each hang, up to 60 s; decision 0035)",
    )

    def __post_init__(self) -> None:
        self.task_retry  # noqa: B018 - checks the backoff (ConfigError)
        if self.txn_stall_exit_s <= 0:
            raise ConfigError("txn_stall_exit_s must be > 0")
        if not 0 < self.txn_hang_s <= 60:
            raise ConfigError(f"txn_hang_s must be > 0 and <= 60, not {self.txn_hang_s}")
        if not self.instance_id or any(c.isspace() for c in self.instance_id):
            raise ConfigError("processor instance_id must be a non-empty word")
        if self.max_batch < 1:
            raise ConfigError("max_batch must be >= 1")
        if self.heartbeat_interval_ms <= 0:
            raise ConfigError("heartbeat_interval_ms must be > 0")
        if self.group_protocol not in ("classic", "consumer"):
            raise ConfigError(f"processor group_protocol must be 'classic' or 'consumer', not {self.group_protocol!r}")
        if self.store not in ("disk", "memory"):
            raise ConfigError(f"processor store must be 'disk' or 'memory', not {self.store!r}")

    @property
    def task_retry(self) -> WorkflowTaskRetry:
        """The backoff of failed workflow tasks."""
        return WorkflowTaskRetry(self.workflow_task_retry_initial_ms, self.workflow_task_retry_max_ms)

    @classmethod
    def from_env(cls, kafka: KafkaConfig, env: Mapping[str, str] | None = None, **overrides: Any) -> ProcessorConfig:
        """The settings from the environment (``overrides`` win: command-line options, tests)."""
        return settings.from_env(cls, env, kafka=kafka, **overrides)


def group_membership(config: ProcessorConfig) -> dict[str, Any]:
    """The consumer settings of the processor's group protocol (decision 0050): under KIP-848 the
    brokers own the session timeout, the heartbeat and the assignor, and librdkafka refuses the
    classic protocol's settings for them."""
    if config.group_protocol == "consumer":
        return {"group.protocol": "consumer"}
    return {
        "session.timeout.ms": config.session_timeout_ms,
        "heartbeat.interval.ms": config.heartbeat_interval_ms,
        "partition.assignment.strategy": "cooperative-sticky",
    }


def claim_state_dir(base: Path, stem: str) -> Path:
    """``base/stem-<pid>``, after removing the directories of dead processes with the same stem
    (a SIGKILLed processor cannot clean up; its stores are rebuilt from Kafka anyway)."""
    for old in base.glob(f"{stem}-*"):
        pid = old.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    path = base / f"{stem}-{os.getpid()}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
