"""The engine: the history processor (workflow state machines on exactly-once transactions) and the
timer service (durable timers on delay topics).

Never imported by the SDK, the gateway or the connectors.
"""

from .disk_store import DiskShardStore
from .effects import BatchView, Outbox
from .history_processor import HistoryProcessor, ProcessorConfig
from .shard_store import ShardStore
from .state_machine import transition
from .store import MemoryShardStore, restore_shard
from .timer_config import TimerConfig, choose_tier
from .timer_service import TimerService

__all__ = [
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
]
