"""A shard's concurrency limits (``processors.concurrency``) read back from ``{ns}.concurrency``
when the shard is assigned: the latest record of each key in the partition, as the processor
that wrote them left them. The topic is partitioned as the commands, so a shard's limits are one
partition of it, written only by the shard's owner in its transactions."""

from __future__ import annotations

import logging
import time
from typing import cast

from kadence.schemas.records import ConcurrencyState
from kadence.topics import serde
from kadence.topics.config import KafkaConfig
from kadence.topics.errors import SchemaError

from .store import read_partition

__all__ = ["restore_limits"]

log = logging.getLogger(__name__)


def restore_limits(config: KafkaConfig, topic: str, partition: int) -> dict[str, ConcurrencyState]:
    """Key -> the limit's holders and waiters. A record that cannot be decoded stops the
    restore (``SchemaError``): a shard that forgot a limit's holders would admit more than its
    max, so it is not served until a processor that reads the record restores it."""
    raws: dict[str, tuple[bytes, int]] = {}
    t0 = time.monotonic()

    def on_record(key: bytes | None, value: bytes | None, offset: int) -> None:
        if key is None:
            return
        if value is None:
            raws.pop(key.decode(), None)
        else:
            raws[key.decode()] = (value, offset)

    read_partition(config, topic, partition, on_record, label="concurrency")
    limits: dict[str, ConcurrencyState] = {}
    codec = serde.codec("ConcurrencyState") if raws else None  # a processor that meets no limit needs none
    for key, (raw, offset) in raws.items():
        assert codec is not None
        try:
            limits[key] = cast(ConcurrencyState, codec.decode(raw))
        except SchemaError as exc:
            raise SchemaError(
                f"concurrency limit {key!r} at {topic}[{partition}]@{offset} cannot be decoded: {exc}"
            ) from exc
    if limits:
        log.info(
            "restored %d concurrency limits of partition %d in %.2fs", len(limits), partition, time.monotonic() - t0
        )
    return limits
