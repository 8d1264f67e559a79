"""What the timer service holds: each assigned tier partition (``TierPartition``) and each
accepted timer record until its output is acknowledged (``AcceptedTimer``)."""

from __future__ import annotations

from collections import deque
from typing import Any

from confluent_kafka import TopicPartition

from kadence.topics.catalogue import TIMER_TIERS_MS

from .timer_config import NEAR_TIER

__all__ = ["UNDECODED", "AcceptedTimer", "TierPartition"]


class TierPartition:
    """State of one assigned partition of a tier topic."""

    __slots__ = (
        "alive",
        "committed",
        "delay_ms",
        "dirty",
        "head",
        "near",
        "next_offset",
        "partition",
        "paused",
        "pending",
        "rewind_to",
        "tier",
        "topic",
    )

    def __init__(self, topic: str, partition: int, tier: str) -> None:
        self.topic = topic
        self.partition = partition
        self.tier = tier
        self.delay_ms = TIMER_TIERS_MS[tier]
        self.near = tier == NEAR_TIER
        #: accepted records not yet acknowledged, in offset order (the commit point is the first)
        self.pending: deque[AcceptedTimer] = deque()
        #: offset after the last accepted record
        self.next_offset: int | None = None
        self.committed: int | None = None
        #: the one record held (far tiers)
        self.head: AcceptedTimer | None = None
        self.paused = False
        #: first offset a batch delivered while the partition was paused: fetch it again
        self.rewind_to: int | None = None
        self.alive = True
        self.dirty = False

    def tp(self, offset: int | None = None) -> TopicPartition:
        if offset is None:
            return TopicPartition(self.topic, self.partition)
        return TopicPartition(self.topic, self.partition, offset)

    def commit_point(self) -> int | None:
        return self.pending[0].offset if self.pending else self.next_offset


#: a record's timer before it is decoded (never read: a record that does not decode is dead-lettered)
UNDECODED: dict[str, Any] = {}


class AcceptedTimer:
    """One accepted timer record, from consumption until its output is acknowledged."""

    __slots__ = ("done", "key", "offset", "out", "part", "timer", "value")

    def __init__(self, part: TierPartition, offset: int, key: bytes | None, value: bytes | None) -> None:
        self.part = part
        self.offset = offset
        self.key = key
        self.value = value
        #: the decoded timer (set when the record is accepted; every later step reads it)
        self.timer: dict[str, Any] = UNDECODED
        self.done = False
        #: (topic, value, key) of the output in flight, kept for a retry
        self.out: tuple[str, bytes | None, bytes | None] | None = None
