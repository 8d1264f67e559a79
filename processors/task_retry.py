"""How the engine retries a failed workflow task (decision 0003, 0051): with exponential backoff,
for as long as the run is open, so that fixed code deployed at any time resumes the run."""

from __future__ import annotations

from dataclasses import dataclass

from kadence.topics.errors import ConfigError

__all__ = ["WorkflowTaskRetry"]


@dataclass(frozen=True)
class WorkflowTaskRetry:
    """Backoff before retrying a failed workflow task: ``initial_ms``, doubling each attempt,
    capped at ``max_ms``. Never gives up: Temporal's behaviour, and the only one under which a
    fix deployed days later still resumes a run without an operator (each retry records one
    ``WorkflowTaskScheduled`` event: at the 10-minute cap, 144 events a day)."""

    initial_ms: int = 1_000
    max_ms: int = 600_000

    def __post_init__(self) -> None:
        if self.initial_ms <= 0:
            raise ConfigError(f"the workflow task retry's initial delay must be > 0 ms, not {self.initial_ms}")
        if self.max_ms < self.initial_ms:
            raise ConfigError(
                f"the workflow task retry's maximum delay ({self.max_ms} ms) must be >= its initial one "
                f"({self.initial_ms} ms)"
            )

    def delay_ms(self, attempt: int) -> int:
        """The wait after attempt ``attempt`` (1-based) failed."""
        doublings = min(max(attempt, 1) - 1, 40)  # 2**40 x 1 ms is past any cap
        return min(self.initial_ms << doublings, self.max_ms)
