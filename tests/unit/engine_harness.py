"""Drive the state machine and workflow instances together in memory (pure logic, no Kafka).

Used by unit tests of the replay logic; the integration tests prove the same on a real broker.
"""

from __future__ import annotations

from kadence._instance import WorkflowInfo, WorkflowInstance
from kadence.processors.deadlines import activity_deadlines
from kadence.processors.effects import BatchView, Outbox
from kadence.processors.state_machine import transition
from kadence.processors.store import MemoryShardStore
from kadence.processors.task_retry import WorkflowTaskRetry
from kadence.topics import serde
from kadence.topics.payload import JsonConverter
from kadence.topics.records import command, now_ms


class Harness:
    def __init__(self, task_retry: WorkflowTaskRetry | None = None):
        self.store = MemoryShardStore(0)
        self.task_retry = task_retry or WorkflowTaskRetry()
        #: the time of the last transition (epoch ms)
        self.last_ts = 0
        self.events: list[dict] = []
        self.tasks: list = []
        self.replies: list = []
        self.timers: list = []
        self._fired_deadlines: set = set()
        #: task queue -> default build, as the processor reads it from {ns}.builds
        self.build_defaults: dict = {}

    def send(self, workflow_id, body_type, body, *, request_id=None, run_id=None):
        cmd = command(workflow_id, body_type, body, request_id=request_id, run_id=run_id)
        cmd = serde.decode("Command", serde.encode("Command", cmd))  # as the processor sees it
        view, out = BatchView(self.store, self.build_defaults, self.task_retry), Outbox()
        self.last_ts = now_ms()
        transition(cmd, view, out, self.last_ts)
        view.commit_into(self.store)
        self.events += [serde.decode("HistoryEvent", serde.encode("HistoryEvent", e)) for _, e in out.events]
        self.tasks += out.tasks
        self.replies += out.replies
        self.timers += out.timers
        return out

    def deadlines(self) -> list[dict]:
        """The activity deadlines the processor would hold for the store's workflows (decision
        0026), as timer records, minus those already fired."""
        out = []
        for wf, st in list(self.store._states.items()):
            for body in activity_deadlines(st):
                t = {**body, "workflow_id": wf, "run_id": st["run_id"]}
                if (wf, body["timer_id"], body["fire_at_ms"]) not in self._fired_deadlines:
                    out.append(t)
        return out

    def fire_timers(self, until_ms: int | None = None) -> int:
        """Send FireTimer for every timer and activity deadline due by ``until_ms`` (all when
        None); returns how many."""
        due = [t for t in self.timers if until_ms is None or t["fire_at_ms"] <= until_ms]
        self.timers = [t for t in self.timers if t not in due]
        local = [t for t in self.deadlines() if until_ms is None or t["fire_at_ms"] <= until_ms]
        self._fired_deadlines.update((t["workflow_id"], t["timer_id"], t["fire_at_ms"]) for t in local)
        due += local
        for t in sorted(due, key=lambda t: t["fire_at_ms"]):
            self.send(
                t["workflow_id"],
                "FireTimer",
                {
                    "timer_id": t["timer_id"],
                    "fire_at_ms": t["fire_at_ms"],
                    "kind": t["kind"],
                    "scheduled_seq": t["scheduled_seq"],
                    "attempt": t["attempt"],
                },
                run_id=t["run_id"],
            )
        return len(due)

    def start(self, workflow_id, wtype, args, queue="q", request_id="r1"):
        conv = JsonConverter()
        return self.send(
            workflow_id,
            "StartWorkflow",
            {"workflow_type": wtype, "task_queue": queue, "input": conv.to_bytes(list(args))},
            request_id=request_id,
        )

    def take_tasks(self, kind):
        mine = [t for t in self.tasks if t[0] == kind]
        self.tasks = [t for t in self.tasks if t[0] != kind]
        return [t[2] for t in mine]


_conv = JsonConverter()


class Driver:
    """Runs a workflow class against the in-memory harness, with a cached worker instance."""

    def __init__(self, cls, activity_fn=None):
        self.h = Harness()
        self.cls = cls
        self.inst = None
        self.activity_fn = activity_fn or (lambda task, args: ("ok", args[0]))

    def step(self):
        progressed = False
        for task in self.h.take_tasks("workflow"):
            progressed = True
            if task["query"] is not None:
                continue
            if self.inst is None or task["full_history"] or self.inst.info.run_id != task["run_id"]:
                d = self.cls.__kadence_workflow__
                self.inst = WorkflowInstance(d, WorkflowInfo(task["workflow_id"], task["run_id"], d.name, "q"), _conv)
            cmds = self.inst.apply(task["events"], task["scheduled_seq"])
            self.h.send(
                task["workflow_id"],
                "RespondWorkflowTaskCompleted",
                {"scheduled_seq": task["scheduled_seq"], "commands": cmds},
                run_id=task["run_id"],
            )
        for task in self.h.take_tasks("activity"):
            progressed = True
            outcome, value = self.activity_fn(task, _conv.from_bytes(task["input"]))
            common = {
                "activity_id": task["activity_id"],
                "scheduled_seq": task["scheduled_seq"],
                "attempt": task["attempt"],
            }
            if outcome == "ok":
                self.h.send(
                    task["workflow_id"],
                    "RespondActivityTaskCompleted",
                    {**common, "result": _conv.to_bytes(value)},
                    run_id=task["run_id"],
                )
            elif outcome == "fail":
                self.h.send(
                    task["workflow_id"],
                    "RespondActivityTaskFailed",
                    {**common, "failure": {"type": "ValueError", "message": value}},
                    run_id=task["run_id"],
                )
        return progressed

    def run(self, fire_timers=True):
        while self.step() or (fire_timers and self.h.fire_timers()):
            pass

    def kinds(self, run_id=None):
        return [e["attributes"][0] for e in self.h.events if run_id is None or e["run_id"] == run_id]

    def state(self):
        return self.h.store.get_state("wf")
