"""Kafka's default partitioner (murmur2 of the key), as the Java client computes it.

Workflow IDs hash to command/history/state partitions with this function, so that a record
produced by any Kafka client with the workflow ID as key lands on the workflow's shard.
"""

from __future__ import annotations

__all__ = ["murmur2", "partition_for"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """32-bit murmur2 with Kafka's seed (0x9747b28c); returns a signed 32-bit int like Java."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    nblocks = length // 4
    for i in range(nblocks):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = data[4 * nblocks :]
    rem = len(tail)
    if rem == 3:
        h ^= tail[2] << 16
    if rem >= 2:
        h ^= tail[1] << 8
    if rem >= 1:
        h ^= tail[0]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str | bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key``."""
    data = key.encode() if isinstance(key, str) else key
    return (murmur2(data) & 0x7FFFFFFF) % partitions
