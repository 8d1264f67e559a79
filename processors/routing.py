"""Where a command belongs, and commands that never need the topic.

Every command belongs to the commands partition its key (a workflow ID, or a concurrency limit's
key) hashes to (murmur2, Kafka's default partitioner: ``wrong_partition``).

A concurrency slot's request, grant or release (``processors.concurrency``) is produced to the
shard that owns its key or its holder. When this instance owns that shard too, ``InlineDelivery``
applies the command there in the same batch instead (decision 0057): the sender's and the
receiver's changes then commit in one Kafka transaction, which is what producing the command in
one transaction and consuming it in the next would give, minus a round trip through the topic.
A command that fails there is produced after all (and dead-lettered where it is read, as any)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kadence.topics import serde
from kadence.topics.errors import WrongPartitionError
from kadence.topics.log_context import reset_log_fields, set_log_fields
from kadence.topics.partitioner import partition_for
from kadence.topics.records import command
from kadence.topics.tracing import Tracer

from .effects import BatchView, Outbox
from .shard_store import ShardStore
from .traced import traced_transition

__all__ = ["INLINE", "InlineDelivery", "wrong_partition"]

log = logging.getLogger(__name__)

#: the command types applied in the batch when their shard is this instance's
INLINE = frozenset({"ConcurrencySlot"})


def wrong_partition(topic: str, workflow_id: str, partition: int, partitions: int) -> WrongPartitionError | None:
    """An error if a command of ``workflow_id`` was read from another partition than the one its
    ID hashes to (murmur2, Kafka's default partitioner: what every reader of the workflow's
    history, state and replies computes). librdkafka's own default partitioner (consistent_random,
    CRC32) puts the same key elsewhere; a producer must use ``partitioner=murmur2_random``."""
    expected = partition_for(workflow_id, partitions)
    if expected == partition:
        return None
    return WrongPartitionError(
        f"wrong partition: workflow {workflow_id!r} belongs on {topic} partition {expected} "
        f"(murmur2 of the workflow ID), the command was produced to partition {partition}; produce with "
        "Kafka's default partitioner (librdkafka: partitioner=murmur2_random)",
        expected_partition=expected,
        partition=partition,
    )


class InlineDelivery:
    """Applies a batch's ``INLINE`` commands to the shards this instance owns (``deliver``)."""

    def __init__(
        self,
        stores: dict[int, ShardStore],
        quarantine: dict[int, dict[str, str]],
        view_for: Callable[[int, ShardStore], BatchView],
        tracer: Tracer,
    ) -> None:
        self._stores, self._quarantine, self._view_for, self._tracer = stores, quarantine, view_for, tracer
        self._codec = serde.codec("Command")
        #: the commands topic's partition count (set when the processor checks its topics)
        self.partitions = 0

    def deliver(self, views: dict[int, BatchView], outboxes: dict[int, Outbox], ts: int) -> int:
        """Apply every ``INLINE`` command of ``outboxes`` whose shard this instance owns, and
        those they cause, until none is left; how many. The others stay to be produced."""
        applied, produce = 0, set()  # ids of commands that failed here: produced instead
        while True:
            found: list[tuple[Outbox, int, Any]] = []
            for out in outboxes.values():
                keep = []
                for c in out.commands:
                    q = partition_for(c[0], self.partitions) if c[1] in INLINE and id(c) not in produce else -1
                    if q in self._stores:
                        found.append((out, q, c))
                    else:
                        keep.append(c)
                out.commands = keep
            if not found:
                return applied
            for sender, q, c in found:
                if self._apply(q, c, views, outboxes, ts):
                    applied += 1
                else:  # produced with the batch, from the outbox that sent it
                    produce.add(id(c))
                    sender.commands.append(c)

    def _apply(
        self, q: int, c: tuple[Any, ...], views: dict[int, BatchView], outboxes: dict[int, Outbox], ts: int
    ) -> bool:
        wf, body_type, body, run_id, request_id, _ref = c
        store = self._stores[q]
        if (self._quarantine.get(q) or {}).get(wf):
            return False  # read where it is produced to, and dead-lettered there with the reason
        view = views.get(q) or views.setdefault(q, self._view_for(q, store))
        out = outboxes.get(q) or outboxes.setdefault(q, Outbox())
        cmd = self._codec.decode(self._codec.encode(command(wf, body_type, body, run_id=run_id, request_id=request_id)))
        checkpoint, mark = view.checkpoint(wf), out.mark()
        fields = set_log_fields(wf, run_id, q)
        try:
            traced_transition(self._tracer, cmd, view, out, ts, mark, None)
            out.inline += 1
            return True
        except Exception:
            log.exception("%s failed on %s partition %d; it is produced instead", body_type, wf, q)
            view.rollback(wf, checkpoint)
            out.truncate(mark)
            return False
        finally:
            reset_log_fields(fields)
