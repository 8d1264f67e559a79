"""Simulated shards for the concurrency and rate limit tests (tests/unit/test_concurrency_limits.py,
test_rate_limits.py): each shard has its store, its concurrency table and an inbox of commands;
a limit's owner is the shard its key hashes to, the commands between shards are delivered in the
order each shard wrote them, and which shard runs next is the tests' choice (random)."""

from __future__ import annotations

import random
from collections import deque

from kadence.processors.effects import BatchView, Outbox
from kadence.processors.state_machine import transition
from kadence.processors.store import MemoryShardStore
from kadence.topics import serde
from kadence.topics.concurrency import command_key
from kadence.topics.partitioner import partition_for
from kadence.topics.records import command

__all__ = ["OPTIONS", "PARTITIONS", "Shards"]

PARTITIONS = 3
OPTIONS = {
    "task_queue": "q",
    "schedule_to_close_timeout_ms": None,
    "schedule_to_start_timeout_ms": None,
    "start_to_close_timeout_ms": 10_000,
    "heartbeat_timeout_ms": None,
    "retry_policy": None,
}


class Shards:
    """Shards with their stores and concurrency tables; each has an inbox of commands."""

    def __init__(self, seed: int = 0, *, inline: float = 0.0, queue_limits: dict | None = None) -> None:
        self.queue_limits = queue_limits or {}
        #: the share of slot commands applied at once, ahead of what waits in their shard's inbox
        #: (the processor's ``routing.InlineDelivery`` when it owns the receiving shard)
        self.inline = inline
        self.stores = [MemoryShardStore(p) for p in range(PARTITIONS)]
        self.limits: list[dict] = [{} for _ in range(PARTITIONS)]
        self.inboxes: list[deque] = [deque() for _ in range(PARTITIONS)]
        self.tasks: list = []
        self.events: list = []
        self.replies: list = []
        #: the timers the shards started (``TimerRecord``-shaped), for ``fire_due``
        self.timers: list = []
        self.rng = random.Random(seed)
        self.ts = 1_000_000

    def send(self, key, body_type, body, *, run_id=None, request_id=None):
        self.inboxes[partition_for(key, PARTITIONS)].append(
            command(key, body_type, body, run_id=run_id, request_id=request_id)
        )

    def step(self, p: int) -> bool:
        if not self.inboxes[p]:
            return False
        cmd = serde.decode("Command", serde.encode("Command", self.inboxes[p].popleft()))
        view, out = BatchView(self.stores[p], limits=self.limits[p], queue_limits=self.queue_limits), Outbox()
        self.ts += 7
        transition(cmd, view, out, self.ts)
        for key, cs in view.limits.items():  # what the processor writes to {ns}.concurrency
            view.limits[key] = serde.decode("ConcurrencyState", serde.encode("ConcurrencyState", cs))
        view.commit_into(self.stores[p])
        self.events += [{**ev, "workflow_id": wf} for wf, ev in out.events]
        self.tasks += [task for _kind, _q, task in out.tasks]
        self.replies += out.replies
        self.timers += out.timers
        for wf, body_type, body, run_id, request_id, _ref in out.commands:
            self.send(wf, body_type, body, run_id=run_id, request_id=request_id)
            if body_type == "ConcurrencySlot" and self.rng.random() < self.inline:
                q = partition_for(wf, PARTITIONS)
                self.inboxes[q].appendleft(self.inboxes[q].pop())  # overtakes what was sent before
                self.step(q)
        return True

    def run_some(self, n: int) -> None:
        for _ in range(n):
            ready = [p for p in range(PARTITIONS) if self.inboxes[p]]
            if not ready:
                return
            self.step(self.rng.choice(ready))

    def fire_due(self) -> int:
        """Send a ``FireTimer`` for each timer due at the shards' clock; how many."""
        due = [t for t in self.timers if t["fire_at_ms"] <= self.ts]
        self.timers = [t for t in self.timers if t["fire_at_ms"] > self.ts]
        for t in due:
            body = {k: t[k] for k in ("timer_id", "fire_at_ms", "kind", "scheduled_seq", "attempt")}
            self.send(t["workflow_id"], "FireTimer", body, run_id=t["run_id"])
        return len(due)

    def drain(self) -> None:
        while any(self.inboxes):
            self.run_some(1000)

    def state(self, wf):
        return self.stores[partition_for(wf, PARTITIONS)].get_state(wf)

    def owner(self, name, value, per_ms=None):
        key = command_key(name, value, per_ms)
        return self.limits[partition_for(key, PARTITIONS)].get(key)

    def take_tasks(self, kind="workflow"):
        field = "activity_type" if kind == "activity" else "events"
        mine = [t for t in self.tasks if field in t]
        self.tasks = [t for t in self.tasks if field not in t]
        return mine

    def start(self, wf, limits, rid=None):
        body = {
            "workflow_type": "W",
            "task_queue": "q",
            "input": b"[]",
            "concurrency": [lim.to_record() for lim in limits],
        }
        self.send(wf, "StartWorkflow", body, request_id=rid or f"start-{wf}")

    def runs_scheduling_one_activity(self, workflows, options) -> None:
        """Start ``workflows`` (no limits of their own), each of whose first workflow task
        schedules activity "1" (type ``charge``) with ``options``."""
        for wf in workflows:
            self.start(wf, [])
        self.drain()
        for task in self.take_tasks():
            activity = {"activity_id": "1", "activity_type": "charge", "input": b"[]", "options": options}
            self.complete(task, [("ScheduleActivityTask", activity)])
        self.drain()

    def complete(self, task, commands=None):
        self.send(
            task["workflow_id"],
            "RespondWorkflowTaskCompleted",
            {
                "scheduled_seq": task["scheduled_seq"],
                "commands": commands if commands is not None else [("CompleteWorkflowExecution", {"result": b"1"})],
            },
            run_id=task["run_id"],
        )
