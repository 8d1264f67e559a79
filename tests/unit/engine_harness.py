"""Drive the state machine and workflow instances together in memory (pure logic, no Kafka).

Used by unit tests of the replay logic; the integration tests prove the same on a real broker.
"""

from __future__ import annotations

from kadence.processors.state_machine import BatchView, Outbox, transition
from kadence.processors.store import MemoryShardStore
from kadence.topics.payload import JsonConverter
from kadence.topics import serde
from kadence.topics.records import command


class Harness:
    def __init__(self):
        self.store = MemoryShardStore(0)
        self.events: list[dict] = []
        self.tasks: list = []
        self.replies: list = []

    def send(self, workflow_id, body_type, body, *, request_id=None, run_id=None):
        cmd = command(workflow_id, body_type, body, request_id=request_id, run_id=run_id)
        cmd = serde.decode("Command", serde.encode("Command", cmd))  # as the processor sees it
        view, out = BatchView(self.store), Outbox()
        transition(cmd, view, out)
        view.commit_into(self.store)
        self.events += [serde.decode("HistoryEvent", serde.encode("HistoryEvent", e)) for _, e in out.events]
        self.tasks += out.tasks
        self.replies += out.replies
        return out

    def start(self, workflow_id, wtype, args, queue="q", request_id="r1"):
        conv = JsonConverter()
        return self.send(workflow_id, "StartWorkflow", {"workflow_type": wtype, "task_queue": queue,
                                                        "input": conv.to_bytes(list(args))}, request_id=request_id)

    def take_tasks(self, kind):
        mine = [t for t in self.tasks if t[0] == kind]
        self.tasks = [t for t in self.tasks if t[0] != kind]
        return [t[2] for t in mine]
