"""One workflow run in a worker: its code on a deterministic loop, driven by history events.

``WorkflowInstance.apply(events, scheduled_seq)`` consumes events in sequence order:

* resolutions (the start, activity results) are queued with their sequence number;
* at each ``WorkflowTaskCompleted`` of the past the code is re-run ("activated") with the
  resolutions that were recorded before that task was scheduled, and the commands it produces
  must equal the command events that the history recorded right after it;
* at the ``WorkflowTaskScheduled`` that the task is for, the code runs live and the commands it
  produces are returned, to be sent to the engine.

A difference between the code's commands and the recorded ones raises ``NonDeterminismError``
naming the first diverging event; the history itself is never touched.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

from kadence.topics.errors import ActivityError, NonDeterminismError
from kadence.topics.payload import JsonConverter, exception_from_failure, failure_from_exception
from kadence.topics.records import COMMAND_EVENT_TYPES

from ._definitions import WorkflowDefinition
from ._loop import DeterministicLoop

__all__ = ["WorkflowInstance", "WorkflowInfo", "HistoryGapError"]

log = logging.getLogger(__name__)


class HistoryGapError(Exception):
    """The task's events do not follow what this instance has seen: full history needed."""


@dataclass(frozen=True)
class WorkflowInfo:
    workflow_id: str
    run_id: str
    workflow_type: str
    task_queue: str
    attempt: int = 1


def _describe(kind: str, attrs: dict) -> str:
    if kind in ("ScheduleActivityTask", "ActivityTaskScheduled"):
        return f"{kind}(activity_type={attrs['activity_type']!r}, activity_id={attrs['activity_id']!r})"
    return kind


_MATCHING_EVENT = {
    "ScheduleActivityTask": "ActivityTaskScheduled",
    "CompleteWorkflowExecution": "WorkflowExecutionCompleted",
    "FailWorkflowExecution": "WorkflowExecutionFailed",
}


class WorkflowInstance:
    def __init__(self, defn: WorkflowDefinition, info: WorkflowInfo, converter: JsonConverter):
        self.defn = defn
        self.info = info
        self.converter = converter
        self.loop = DeterministicLoop(self)
        self.last_seq = 0
        self.replaying = True
        self.closed = False
        self._resolutions: list[tuple[int, str, dict]] = []
        self._unmatched: collections.deque = collections.deque()
        self._matching = False
        self._activated_for: int | None = None
        self._wt_times: dict[int, int] = {}
        self._activities: dict[str, asyncio.Future] = {}
        self._next_activity = 0
        self._main: asyncio.Task | None = None
        self._obj = None
        self._now_ms = 0
        self._random: random.Random | None = None

    # -- workflow-facing runtime ---------------------------------------------------------------

    def now(self) -> datetime:
        return datetime.fromtimestamp(self._now_ms / 1000, tz=timezone.utc)

    def random(self) -> random.Random:
        if self._random is None:
            self._random = random.Random(self.info.run_id)
        return self._random

    def uuid4(self) -> uuid.UUID:
        return uuid.UUID(int=self.random().getrandbits(128), version=4)

    def schedule_activity(self, activity_type: str, args: tuple, options: dict) -> asyncio.Future:
        if self.closed:
            raise RuntimeError("workflow already completed")
        self._next_activity += 1
        activity_id = str(self._next_activity)
        fut = self.loop.create_future()
        self._activities[activity_id] = fut
        self._unmatched.append(("ScheduleActivityTask", {
            "activity_id": activity_id, "activity_type": activity_type,
            "input": self.converter.to_bytes(list(args)), "options": options,
        }))
        return fut

    # -- driving -------------------------------------------------------------------------------

    def apply(self, events: list[dict], scheduled_seq: int) -> list[tuple[str, dict]]:
        """Consume a task's events; return the commands of the live activation (maybe empty)."""
        commands: list[tuple[str, dict]] = []
        for ev in events:
            seq = ev["seq"]
            if seq <= self.last_seq:
                continue
            if seq != self.last_seq + 1:
                raise HistoryGapError(f"expected event {self.last_seq + 1}, got {seq}")
            self.last_seq = seq
            kind, attrs = ev["attributes"]
            if kind in COMMAND_EVENT_TYPES:
                self._match(seq, kind, attrs)
                continue
            self._end_matching(seq, kind)
            if kind == "WorkflowExecutionStarted":
                self._resolutions.append((seq, kind, attrs))
            elif kind in ("ActivityTaskCompleted", "ActivityTaskFailed"):
                self._resolutions.append((seq, kind, attrs))
            elif kind == "WorkflowTaskScheduled":
                self._wt_times[seq] = ev["timestamp_ms"]
                if seq == scheduled_seq:
                    self.replaying = False
                    self._activate(seq)
                    commands = list(self._unmatched)
            elif kind == "WorkflowTaskCompleted":
                if self._activated_for != attrs["scheduled_seq"]:
                    self._activate(attrs["scheduled_seq"])
                self._matching = True
        return commands

    def _end_matching(self, seq: int, kind: str) -> None:
        if self._matching:
            self._matching = False
            if self._unmatched:
                ckind, cattrs = self._unmatched[0]
                raise NonDeterminismError(
                    f"workflow {self.info.workflow_type} ({self.info.workflow_id}): the code produced "
                    f"{_describe(ckind, cattrs)} but history event {seq} is {kind}; "
                    "the code changed in a way that is not replay-safe (use workflow.patched())")

    def _match(self, seq: int, kind: str, attrs: dict) -> None:
        if not self._unmatched:
            raise NonDeterminismError(
                f"workflow {self.info.workflow_type} ({self.info.workflow_id}): history event {seq} is "
                f"{_describe(kind, attrs)} but the code produced no such command "
                "(the code changed in a way that is not replay-safe; use workflow.patched())")
        ckind, cattrs = self._unmatched.popleft()
        same = _MATCHING_EVENT[ckind] == kind
        if same and kind == "ActivityTaskScheduled":
            same = (cattrs["activity_type"] == attrs["activity_type"] and cattrs["activity_id"] == attrs["activity_id"])
        if not same:
            raise NonDeterminismError(
                f"workflow {self.info.workflow_type} ({self.info.workflow_id}): history event {seq} is "
                f"{_describe(kind, attrs)} but the code produced {_describe(ckind, cattrs)} "
                "(the code changed in a way that is not replay-safe; use workflow.patched())")

    def _activate(self, scheduled_seq: int) -> None:
        self._activated_for = scheduled_seq
        self._now_ms = self._wt_times.pop(scheduled_seq, self._now_ms)
        self.loop.set_time(self._now_ms / 1000)
        ready = [r for r in self._resolutions if r[0] < scheduled_seq]
        self._resolutions = [r for r in self._resolutions if r[0] >= scheduled_seq]
        for seq, kind, attrs in ready:
            self._resolve(seq, kind, attrs)
        self.loop.run_until_idle()
        if self.loop.errors:
            err = self.loop.errors[0]
            self.loop.errors.clear()
            raise err

    def _resolve(self, seq: int, kind: str, attrs: dict) -> None:
        if kind == "WorkflowExecutionStarted":
            args = self.converter.from_bytes(attrs["input"]) or []
            self._obj = self.defn.cls()
            coro = self.defn.run_fn(self._obj, *args)
            self._main = self.loop.create_task(coro, name=f"workflow:{self.info.workflow_id}")
            self._main.add_done_callback(self._on_main_done)
            return
        fut = self._activities.pop(attrs["activity_id"], None)
        if fut is None:
            raise NonDeterminismError(
                f"workflow {self.info.workflow_type} ({self.info.workflow_id}): history event {seq} "
                f"({kind}) resolves activity {attrs['activity_id']!r} that the code never scheduled")
        if fut.done():
            return
        if kind == "ActivityTaskCompleted":
            fut.set_result(self.converter.from_bytes(attrs["result"]))
        else:
            failure = attrs["failure"]
            err = ActivityError(f"activity {attrs['activity_id']} failed: {failure['type']}: {failure['message']}",
                                activity_id=attrs["activity_id"], attempt=attrs["attempt"], failure=failure)
            err.__cause__ = exception_from_failure(failure)
            fut.set_exception(err)

    def _on_main_done(self, task: asyncio.Task) -> None:
        self.closed = True
        if task.cancelled():
            failure = {"type": "CancelledError", "message": "workflow cancelled", "stack_trace": "",
                       "non_retryable": True, "details": None, "cause": None}
            self._unmatched.append(("FailWorkflowExecution", {"failure": failure}))
            return
        exc = task.exception()
        if exc is None:
            self._unmatched.append(("CompleteWorkflowExecution", {"result": self.converter.to_bytes(task.result())}))
        else:
            self._unmatched.append(("FailWorkflowExecution", {"failure": failure_from_exception(exc)}))

    def discard(self) -> None:
        """Forget this instance (cache eviction) without running any more workflow code."""
        for task in asyncio.all_tasks(self.loop):
            task._log_destroy_pending = False  # evicted on purpose, not leaked
        self.loop.close()
