"""Read the latest state of every workflow from the compacted ``{ns}.state`` topic."""

from __future__ import annotations

from typing import Any

from . import serde
from .catalogue import Catalogue
from .config import KafkaConfig
from .scan import scan

__all__ = ["read_states", "stuck_rows", "stuck_workflows"]


def read_states(config: KafkaConfig) -> dict[str, dict[str, Any]]:
    """workflow ID -> its latest state record (tombstones remove)."""
    states: dict[str, dict[str, Any]] = {}
    for msg in scan(config, Catalogue(config).state):
        if msg.key() is None:
            continue
        if msg.value() is None:
            states.pop(msg.key().decode(), None)
        else:
            states[msg.key().decode()] = serde.decode("WorkflowState", msg.value())
    return states


def stuck_workflows(config: KafkaConfig) -> list[dict[str, Any]]:
    """Running workflows whose last workflow task failed, oldest start first."""
    stuck = [s for s in read_states(config).values() if s["status"] == "running" and s["wt_failure"]]
    return sorted(stuck, key=lambda s: s["start_time_ms"])


def stuck_rows(config: KafkaConfig) -> list[dict[str, Any]]:
    """``stuck_workflows`` as rows: IDs, type, the failure's cause, type and message."""
    return [
        {
            "workflow_id": st["workflow_id"],
            "run_id": st["run_id"],
            "workflow_type": st["workflow_type"],
            "cause": st["wt_failure_cause"],
            "error_type": st["wt_failure"]["type"],
            "error_message": st["wt_failure"]["message"],
        }
        for st in stuck_workflows(config)
    ]
