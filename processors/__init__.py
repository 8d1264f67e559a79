"""The engine: the history processor (workflow state machines on exactly-once transactions) and the
timer service (durable timers on delay topics).

Never imported by the SDK, the gateway or the connectors.
"""

from .history_processor import HistoryProcessor, ProcessorConfig
from .effects import BatchView, Outbox
from .state_machine import transition
from .disk_store import DiskShardStore
from .store import MemoryShardStore, restore_shard
from .timer_service import TimerConfig, TimerService, choose_tier

__all__ = ["HistoryProcessor", "ProcessorConfig", "BatchView", "Outbox", "transition",
           "MemoryShardStore", "DiskShardStore", "restore_shard", "TimerService", "TimerConfig", "choose_tier"]
