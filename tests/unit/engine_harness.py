"""Drive the state machine and workflow instances together in memory (pure logic, no Kafka).

Used by unit tests of the replay logic; the integration tests prove the same on a real broker.
"""

from __future__ import annotations

from kadence.processors.effects import BatchView, Outbox
from kadence.processors.state_machine import transition
from kadence.processors.store import MemoryShardStore
from kadence.topics.payload import JsonConverter
from kadence.topics import serde
from kadence.topics.records import command, now_ms


class Harness:
    def __init__(self):
        self.store = MemoryShardStore(0)
        self.events: list[dict] = []
        self.tasks: list = []
        self.replies: list = []
        self.timers: list = []
        #: task queue -> default build, as the processor reads it from {ns}.builds
        self.build_defaults: dict = {}

    def send(self, workflow_id, body_type, body, *, request_id=None, run_id=None):
        cmd = command(workflow_id, body_type, body, request_id=request_id, run_id=run_id)
        cmd = serde.decode("Command", serde.encode("Command", cmd))  # as the processor sees it
        view, out = BatchView(self.store, self.build_defaults), Outbox()
        transition(cmd, view, out, now_ms())
        view.commit_into(self.store)
        self.events += [serde.decode("HistoryEvent", serde.encode("HistoryEvent", e)) for _, e in out.events]
        self.tasks += out.tasks
        self.replies += out.replies
        self.timers += out.timers
        return out

    def fire_timers(self, until_ms: int | None = None) -> int:
        """Send FireTimer for every timer due by ``until_ms`` (all when None); returns how many."""
        due = [t for t in self.timers if until_ms is None or t["fire_at_ms"] <= until_ms]
        self.timers = [t for t in self.timers if t not in due]
        for t in sorted(due, key=lambda t: t["fire_at_ms"]):
            self.send(t["workflow_id"], "FireTimer", {"timer_id": t["timer_id"], "fire_at_ms": t["fire_at_ms"],
                                                      "kind": t["kind"], "scheduled_seq": t["scheduled_seq"],
                                                      "attempt": t["attempt"]}, run_id=t["run_id"])
        return len(due)

    def start(self, workflow_id, wtype, args, queue="q", request_id="r1"):
        conv = JsonConverter()
        return self.send(workflow_id, "StartWorkflow", {"workflow_type": wtype, "task_queue": queue,
                                                        "input": conv.to_bytes(list(args))}, request_id=request_id)

    def take_tasks(self, kind):
        mine = [t for t in self.tasks if t[0] == kind]
        self.tasks = [t for t in self.tasks if t[0] != kind]
        return [t[2] for t in mine]
