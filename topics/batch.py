"""The records of a batch operation (``kadence.operations.batch`` runs it; the CLI and the
gateway start it): what to do to which runs, and how far it got. Plain dataclasses, typed on the
way in by the SDK's converter and by FastAPI alike."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError

__all__ = [
    "BATCH_OPERATIONS",
    "BATCH_TASK_QUEUE",
    "BATCH_WORKFLOW_TYPE",
    "FAILURES_KEPT",
    "BatchFilter",
    "BatchProgress",
    "BatchRequest",
]

BATCH_TASK_QUEUE = "kadence-batch"
BATCH_WORKFLOW_TYPE = "kadence.Batch"
BATCH_OPERATIONS = ("signal", "cancel", "terminate", "pause", "unpause", "reset")
#: failures listed in the progress (the count goes on beyond it)
FAILURES_KEPT = 100


@dataclass
class BatchFilter:
    """Which runs: the visibility filters of ``kadence list`` (all given must match)."""

    workflow_type: str | None = None
    status: str | None = None
    search: dict[str, str] = field(default_factory=dict)
    paused: bool | None = None
    start_from_ms: int | None = None
    start_to_ms: int | None = None


@dataclass
class BatchRequest:
    operation: str
    filter: BatchFilter = field(default_factory=BatchFilter)
    reason: str = ""
    #: signal: its name and arguments
    signal_name: str | None = None
    signal_args: list[Any] = field(default_factory=list)
    page_size: int = 200
    #: pages one run of the batch handles before it continues as new
    pages_per_run: int = 50

    def check(self) -> None:
        """Raise ``ConfigError`` for a request that cannot run (before anything is started)."""
        if self.operation not in BATCH_OPERATIONS:
            raise ConfigError(f"operation must be one of {', '.join(BATCH_OPERATIONS)} (got {self.operation!r})")
        if self.operation == "signal" and not self.signal_name:
            raise ConfigError("a batch signal needs the signal's name")
        if not 1 <= self.page_size <= 1000:
            raise ConfigError("page_size must be between 1 and 1000")
        if not 1 <= self.pages_per_run <= 1000:
            raise ConfigError("pages_per_run must be between 1 and 1000")
        f = self.filter
        if (
            f.workflow_type is None
            and f.status is None
            and not f.search
            and f.paused is None
            and f.start_from_ms is None
            and f.start_to_ms is None
        ):
            raise ConfigError(
                "a batch needs at least one filter (type, status, search attribute, paused or a "
                "start time): it would act on every run of the namespace"
            )


@dataclass
class BatchProgress:
    operation: str = ""
    #: matching runs when the batch started (the filter's count then; runs may come and go)
    total: int | None = None
    done: int = 0
    succeeded: int = 0
    failed: int = 0
    #: the first FAILURES_KEPT failures: {"workflow_id", "error"}
    failures: list[dict[str, str]] = field(default_factory=list)
    finished: bool = False
    #: where the walk over the visibility projection stands (None: at the start, or at the end)
    cursor: str | None = None
