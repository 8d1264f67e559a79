"""Operator workflows that ship with Kadence, built on the SDK: batch operations (``kadence batch``)
and schedules (``kadence schedules``).

``kadence.operations`` may import the SDK and ``kadence.topics`` only (tests/unit/test_import_direction.py).
"""

from .batch import (
    BATCH_OPERATIONS,
    BATCH_TASK_QUEUE,
    BATCH_WORKFLOW_TYPE,
    Batch,
    BatchFilter,
    BatchProgress,
    BatchRequest,
    batch_activities,
)
from .schedules import Schedule, schedule_activities

__all__ = [
    "BATCH_OPERATIONS",
    "BATCH_TASK_QUEUE",
    "BATCH_WORKFLOW_TYPE",
    "Batch",
    "BatchFilter",
    "BatchProgress",
    "BatchRequest",
    "Schedule",
    "batch_activities",
    "schedule_activities",
]
