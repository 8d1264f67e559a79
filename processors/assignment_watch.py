"""Notices a processor that the group coordinator has given shards it never took.

A ``make chaos`` seed (issue 15's campaign) paused a processor past its session timeout; it woke,
released its shards, and rejoined the group with its static member ID. The coordinator then
assigned it shards 0 and 1 (the other instance, restarted meanwhile, got 2 and 3), but the
processor's consumer never invoked its assign callback: for five minutes nothing logged, and
shards 0 and 1 answered nothing. librdkafka has an open report of the same kind ("Consumer hangs
when session times out while using static groups", #3437).

The watch compares, every few seconds, what the coordinator lists for this instance's
``group.instance.id`` with the shards the processor has restored and serves. When shards stay
assigned-but-not-served for ``limit_s`` while no assignment is in progress, it calls
``on_stall``: the processor exits with ``EXIT_TXN_STALLED`` and a restart with the same instance
ID takes the shards at once (as for a blocked transaction). A broker that does not answer is no
evidence either way: the watch just looks again later.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

__all__ = ["AssignmentWatch", "coordinator_assignment"]

log = logging.getLogger(__name__)


def coordinator_assignment(admin: AdminClient, group: str, instance_id: str, topic: str,
                           timeout: float = 10.0) -> set[int] | None:
    """The partitions of ``topic`` the coordinator has assigned to the static member
    ``instance_id`` of ``group``; None if the broker did not answer."""
    try:
        desc = admin.describe_consumer_groups([group], request_timeout=timeout)[group].result(timeout=timeout)
    except (KafkaException, TimeoutError, Exception):  # noqa: BLE001 - any failure: no evidence
        return None
    for member in desc.members:
        if member.group_instance_id == instance_id:
            return {tp.partition for tp in member.assignment.topic_partitions if tp.topic == topic}
    return set()


class AssignmentWatch:
    def __init__(self, *, assigned: Callable[[], set[int] | None], served: Callable[[], set[int]],
                 assigning: Callable[[], bool], limit_s: float, on_stall: Callable[[set[int], float], None],
                 interval_s: float = 5.0):
        self._assigned, self._served, self._assigning = assigned, served, assigning
        self.limit_s, self.interval_s = limit_s, interval_s
        self._on_stall = on_stall
        self._stop = threading.Event()
        self._since: float | None = None

    def start(self) -> None:
        threading.Thread(target=self._run, name="kadence-assignment-watch", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def check(self, now: float | None = None) -> bool:
        """One look; True when ``on_stall`` was called."""
        now = time.monotonic() if now is None else now
        assigned = self._assigned()
        missing = (assigned - self._served()) if assigned is not None else set()
        if not missing or self._assigning():
            self._since = None
            return False
        if self._since is None:
            self._since = now
            log.info("shards %s are assigned to this processor but not served yet", sorted(missing))
            return False
        if now - self._since < self.limit_s:
            return False
        self._on_stall(missing, now - self._since)
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if self.check():
                return
