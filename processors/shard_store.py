"""What a shard store is: the interface the history processor, the batch view and the restore use,
declared once. Two implementations: ``MemoryShardStore`` (``store.py``, the default of the tests and
``kadence.testing``) and ``DiskShardStore`` (``disk_store.py``, RocksDB, the processor's default:
decision 0024). Both are filled from ``{ns}.state`` and ``{ns}.history`` on assignment and hold
nothing Kafka does not.

Encoded records: the processor encodes every state and event it writes to Kafka, and the restore
reads them encoded. A store that keeps them encoded (the disk store) takes those bytes as they are
instead of encoding again (``raw``/``raws``), and hands a workflow task its events still encoded
(``get_history_encoded``); the memory store keeps dicts and ignores the bytes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from kadence.schemas.records import WorkflowState

__all__ = ["ShardStore"]


class ShardStore(Protocol):
    partition: int

    def get_state(self, workflow_id: str) -> WorkflowState | None: ...

    def put_state(self, workflow_id: str, state: WorkflowState, raw: bytes | None = None) -> None:
        """Keep the workflow's state; ``raw``: the same state as encoded for the state topic."""

    def delete_state(self, workflow_id: str) -> None:
        """Forget the workflow (its state and its open run's history)."""

    def stage_state(self, workflow_id: str, raw: bytes | None) -> None:
        """Restore only, into an empty store: ``raw`` is the workflow's latest state record so far,
        not decoded yet (None: deleted). A workflow updated many times is decoded once."""

    def adopt_staged(self, decode: Callable[[str, bytes], WorkflowState | None]) -> None:
        """Restore only: each staged workflow's latest record becomes its state as ``decode``
        returns it, or is dropped when ``decode`` returns None (quarantined)."""

    def get_history(self, workflow_id: str, run_id: str, since: int = 0) -> list[dict[str, Any]]:
        """The open run's events with seq > ``since``, in seq order (none for another run)."""

    def get_history_encoded(self, workflow_id: str, run_id: str, since: int = 0, upto: int | None = None) -> list[Any]:
        """The open run's events with ``since`` < seq <= ``upto`` as a workflow task carries them:
        decoded dicts, or encoded bodies the task's codec writes as they are."""

    def append_history(
        self, workflow_id: str, run_id: str, events: list[dict[str, Any]], raws: list[bytes] | None = None
    ) -> None:
        """Add events of the open run ``run_id`` (a new run replaces the previous one's);
        ``raws``: the same events as encoded for the history topic."""

    def request_seen(self, workflow_id: str, run_id: str, request_id: str) -> bool:
        """Whether an event of the open run carries ``request_id`` (a retried signal or cancel)."""

    def drop_history(self, workflow_id: str) -> None:
        """Forget the open run's history (the run closed)."""

    def __len__(self) -> int:
        """Workflows with a state."""

    def open_runs(self) -> int:
        """Workflows with an open run's history."""

    def close(self) -> None:
        """Release what the store holds (the shard moved, or the process stops)."""
