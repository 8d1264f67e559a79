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
import dataclasses
import logging
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from kadence.topics import serde
from kadence.topics.errors import (
    ActivityError,
    FailureError,
    NonDeterminismError,
    NotDeterministicError,
    PayloadTypeError,
    SchemaError,
)
from kadence.topics.identifiers import check_task_queue, check_workflow_id
from kadence.topics.payload import PayloadConverter
from kadence.topics.records import COMMAND_EVENT_TYPES, HISTORY_WARN_EVENTS, INLINE_EVENT_TYPES
from kadence.topics.search_attributes import from_wire

from ._child_errors import child_error
from ._definitions import WorkflowDefinition
from ._loop import DeterministicLoop, DurableTimerHandle
from ._messages import WorkflowMessages
from ._replay_rules import IDENTITY, MATCHING_EVENT, RESOLUTIONS, describe_command
from .interceptors import Interceptor

_T = TypeVar("_T")

__all__ = ["ContinueAsNew", "HistoryGapError", "WorkflowInfo", "WorkflowInstance"]

log = logging.getLogger(__name__)


class ContinueAsNew(BaseException):
    """Raised by ``workflow.continue_as_new``: ends the run and starts a fresh one with ``args``.

    A ``BaseException`` so that workflow code's ``except Exception`` does not swallow it."""

    def __init__(self, args: tuple[Any, ...]) -> None:
        super().__init__("continue as new")
        self.run_args = args


#: marker name prefixes of a local activity's outcome: ``{prefix}{activity ID}:{activity type}``
LOCAL_RESULT = "local_activity:"
LOCAL_FAILURE = "local_activity_failed:"


@dataclass
class LocalActivityCall:
    """One call of ``workflow.execute_local_activity`` that the worker has to run."""

    activity_id: str
    activity_type: str
    args: tuple[Any, ...]
    #: start_to_close_timeout_ms, schedule_to_close_timeout_ms, retry_policy (a RetryPolicy or None)
    options: dict[str, Any]
    future: asyncio.Future[Any]
    result_fn: Callable[..., Any] | None = None


class LocalActivitiesPending(Exception):
    """An eager workflow task that would need local activities run first (not run eagerly)."""


def task_failure_cause(exc: BaseException) -> str:
    """The cause a worker reports for a workflow task whose code raised ``exc``."""
    if isinstance(exc, NonDeterminismError):
        return "non_determinism"
    if isinstance(exc, NotDeterministicError):
        return "nondeterministic_call"
    if isinstance(exc, (SchemaError, HistoryGapError, LocalActivitiesPending)):
        return "worker_error"  # a payload or history this worker cannot read
    return "workflow_error"


class HistoryGapError(Exception):
    """The task's events do not follow what this instance has seen: full history needed."""


@dataclass(frozen=True)
class WorkflowInfo:
    workflow_id: str
    run_id: str
    workflow_type: str
    task_queue: str
    attempt: int = 1
    #: what the client's interceptors set with the start (``kadence.interceptors``)
    headers: dict[str, Any] = field(default_factory=dict)
    #: the start's memo, decoded
    memo: dict[str, Any] = field(default_factory=dict)
    #: the run's search attributes (its start's, then each ``upsert_search_attributes``)
    search_attributes: dict[str, Any] = field(default_factory=dict)
    #: a cron workflow's schedule (``cron_schedule=`` at its start)
    cron_schedule: str | None = None
    #: events in the run's history when the current workflow task was scheduled (Temporal's
    #: ``get_current_history_length()``); deterministic, so code may branch on it
    history_length: int = 0

    @property
    def continue_as_new_suggested(self) -> bool:
        """The history is long enough that the engine warns (10,000 events; at 50,000 the run
        fails): time for ``workflow.continue_as_new()`` with the state to carry on."""
        return self.history_length >= HISTORY_WARN_EVENTS


class WorkflowInstance(WorkflowMessages):
    def __init__(
        self,
        defn: WorkflowDefinition,
        info: WorkflowInfo,
        converter: PayloadConverter,
        interceptors: Iterable[Interceptor] = (),
        failure_types: tuple[type[BaseException], ...] = (),
    ) -> None:
        self.defn = defn
        self.info = info
        self.converter = converter
        self.interceptors = tuple(interceptors)
        #: what fails the run when its code raises it (anything else fails the workflow task):
        #: ``FailureError``, a payload that does not fit its declared type, and the types the
        #: definition and the worker declare (``failure_exception_types``)
        self.failure_types: tuple[type[BaseException], ...] = (
            FailureError,
            PayloadTypeError,
            *defn.failure_exception_types,
            *failure_types,
        )
        # a loop of its own making: the methods of AbstractEventLoop it leaves out are those a
        # workflow must not reach (I/O, threads, signals, subprocesses); they raise if called
        self.loop = DeterministicLoop(self)  # type: ignore[abstract]
        self.last_seq = 0
        self.replaying = True
        #: set for an instance built only to answer a query or validate an update (``_queries``)
        self.throwaway = False
        self.closed = False
        self._resolutions: list[tuple[int, str, dict[str, Any]]] = []
        self._unmatched: collections.deque[Any] = collections.deque()
        self._matching = False
        self._activated_for: int | None = None
        self._wt_times: dict[int, int] = {}
        self._activities: dict[str, asyncio.Future[Any]] = {}
        self._next_activity = 0
        self._timers: dict[str, DurableTimerHandle] = {}
        #: timers the code canceled -> the seq of the TimerCanceled event once read (None before):
        #: a fire that raced the cancel (recorded between them) is ignored; an entry is dropped once
        #: the activation past its cancel event has resolved what came before it
        self._canceled_timers: dict[str, int | None] = {}
        #: async signal and update handlers still running (``all_handlers_finished``)
        self._handlers: set[asyncio.Task[Any]] = set()
        #: child workflow ID -> (started future, result future)
        self._children: dict[str, tuple[asyncio.Future[Any], asyncio.Future[Any]]] = {}
        #: ("activity", activity ID) / ("child", workflow ID) -> (the function whose return type
        #: types the result, what it is for messages)
        self._result_fns: dict[tuple[str, str], tuple[Callable[..., Any], str]] = {}
        self._next_child = 0
        self._next_timer = 0
        self._conditions: list[tuple[Any, ...]] = []
        self._cancel_requested = False
        self._patches: dict[str, bool] = {}
        #: the markers (name -> details) the past workflow task being replayed recorded
        self._recorded_markers: dict[str, bytes | None] = {}
        #: local activities called and not resolved yet, in call order (``schedule_local_activity``)
        self._locals: list[LocalActivityCall] = []
        self._next_local = 0
        self._replaying_activation = False
        self._main: asyncio.Task[Any] | None = None
        #: the run's input: its start's, or the last debounced start's that joined it
        self._input: bytes | None = None
        self._obj = None
        self._now_ms = 0
        self._random: random.Random | None = None
        #: request ID of the command that carried an eager workflow task this instance ran and
        #: the engine has not confirmed yet (``run_eager``); None otherwise
        self.eager_token: str | None = None

    # -- workflow-facing runtime ---------------------------------------------------------------

    def now(self) -> datetime:
        return datetime.fromtimestamp(self._now_ms / 1000, tz=UTC)

    def random(self) -> random.Random:
        if self._random is None:
            self._random = random.Random(self.info.run_id)
        return self._random

    def uuid4(self) -> uuid.UUID:
        return uuid.UUID(int=self.random().getrandbits(128), version=4)

    def schedule_activity(
        self,
        activity_type: str,
        args: tuple[Any, ...],
        options: dict[str, Any],
        *,
        result_fn: Callable[..., Any] | None = None,
    ) -> asyncio.Future[Any]:
        """``result_fn``: the activity's function, whose return type types its result."""
        if self.closed:
            raise RuntimeError("workflow already completed")
        self._next_activity += 1
        activity_id = str(self._next_activity)
        fut = self.loop.create_future()
        self._activities[activity_id] = fut
        if result_fn is not None:
            self._result_fns[("activity", activity_id)] = (result_fn, f"activity {activity_type}")
        self._unmatched.append(
            (
                "ScheduleActivityTask",
                {
                    "activity_id": activity_id,
                    "activity_type": activity_type,
                    "input": self.converter.to_bytes(list(args)),
                    "options": options,
                },
            )
        )
        fut.add_done_callback(lambda f: self._on_activity_done(activity_id, f))
        return fut

    def schedule_local_activity(
        self,
        activity_type: str,
        args: tuple[Any, ...],
        options: dict[str, Any],
        *,
        result_fn: Callable[..., Any] | None = None,
    ) -> asyncio.Future[Any]:
        """A local activity (decision 0043): run by the worker inside this workflow task, its
        outcome recorded as a marker with the task's completion; replays take the marker's."""
        if self.closed:
            raise RuntimeError("workflow already completed")
        self._next_local += 1
        call = LocalActivityCall(
            str(self._next_local), activity_type, args, options, self.loop.create_future(), result_fn
        )
        self._locals.append(call)
        return call.future

    def pending_local_activities(self) -> list[LocalActivityCall]:
        """The local activities the activation waits for (the worker runs them, then
        ``resolve_local_activities``). One the workflow stopped waiting for (its task was
        cancelled) is dropped unrun and unrecorded, live and in replay alike; none runs once the
        workflow has closed."""
        self._locals = [c for c in self._locals if not c.future.done()]
        return [] if self.closed else list(self._locals)

    def resolve_local_activities(
        self, outcomes: list[tuple[LocalActivityCall, bytes | None, dict[str, Any] | None]]
    ) -> None:
        """Record each local activity's outcome (result payload, or failure) as a marker command,
        settle what the workflow awaits, and run the workflow until it waits again."""
        for call, result, failure in outcomes:
            if call in self._locals:
                self._locals.remove(call)
            if failure is None:
                name, details = f"{LOCAL_RESULT}{call.activity_id}:{call.activity_type}", result
            else:
                name, details = (
                    f"{LOCAL_FAILURE}{call.activity_id}:{call.activity_type}",
                    serde.encode("Failure", failure),
                )
            self._unmatched.append(("RecordMarker", {"name": name, "details": details}))
            if call.future.done():  # the workflow stopped waiting (its task was cancelled)
                continue
            if failure is None:
                self._settle(
                    call.future,
                    result,
                    (call.result_fn, f"local activity {call.activity_type}") if call.result_fn is not None else None,
                )
            else:
                err = ActivityError(
                    f"local activity {call.activity_id} failed: {failure['type']}: {failure['message']}",
                    activity_type=call.activity_type,
                    activity_id=call.activity_id,
                    failure=failure,
                )
                err.__cause__ = self.converter.exception(failure)
                call.future.set_exception(err)
        self._run_idle()

    def commands(self) -> list[tuple[str, dict[str, Any]]]:
        """The live activation's commands so far."""
        return list(self._unmatched)

    def _replay_local_activities(self) -> None:
        """In a replayed workflow task: the local activities it ran take the outcomes its markers
        recorded, in the same order as when it ran live (each time the workflow waits)."""
        while True:
            pending = self.pending_local_activities()
            if not pending:
                return
            outcomes: list[tuple[LocalActivityCall, bytes | None, dict[str, Any] | None]] = []
            markers = self._recorded_markers
            for call in pending:
                ok_key = f"{LOCAL_RESULT}{call.activity_id}:{call.activity_type}"
                if ok_key in markers:
                    outcomes.append((call, markers[ok_key], None))
                    continue
                failed_key = f"{LOCAL_FAILURE}{call.activity_id}:{call.activity_type}"
                if failed_key not in markers:
                    raise NonDeterminismError(
                        f"workflow {self.info.workflow_type} ({self.info.workflow_id}): the code ran local activity "
                        f"{call.activity_type!r} ({call.activity_id}) in a workflow task whose history recorded no "
                        "outcome for it (the code changed in a way that is not replay-safe; use workflow.patched())"
                    )
                outcomes.append((call, None, serde.decode("Failure", markers[failed_key])))
            self.resolve_local_activities(outcomes)

    def _on_activity_done(self, activity_id: str, fut: asyncio.Future[Any]) -> None:
        # the workflow gave up on the activity (its awaiting task was cancelled): tell the engine
        if fut.cancelled():
            self._result_fns.pop(("activity", activity_id), None)
        if fut.cancelled() and self._activities.pop(activity_id, None) is not None and not self.closed:
            self._unmatched.append(("RequestCancelActivityTask", {"activity_id": activity_id}))

    def start_child(
        self,
        workflow_type: str,
        args: tuple[Any, ...],
        workflow_id: str | None,
        task_queue: str | None,
        parent_close_policy: str,
        run_timeout_ms: int | None,
        *,
        result_fn: Callable[..., Any] | None = None,
        limits: dict[str, Any] | None = None,
    ) -> tuple[str, asyncio.Future[Any], asyncio.Future[Any]]:
        if self.closed:
            raise RuntimeError("workflow already completed")
        if workflow_id is not None:
            check_workflow_id(workflow_id, field="id")
        if task_queue is not None:
            check_task_queue(task_queue)
        self._next_child += 1
        child_id = workflow_id or f"{self.info.workflow_id}/child-{self._next_child}"
        if child_id in self._children:
            raise ValueError(f"child workflow ID {child_id!r} is already used by this run")
        started, result = self.loop.create_future(), self.loop.create_future()
        self._children[child_id] = (started, result)
        if result_fn is not None:
            self._result_fns[("child", child_id)] = (result_fn, f"child workflow {workflow_type}")
        self._unmatched.append(
            (
                "StartChildWorkflowExecution",
                {
                    "workflow_id": child_id,
                    "workflow_type": workflow_type,
                    "task_queue": task_queue or self.info.task_queue,
                    "input": self.converter.to_bytes(list(args)),
                    "parent_close_policy": parent_close_policy,
                    "run_timeout_ms": run_timeout_ms,
                    **(limits or {"concurrency": []}),
                },
            )
        )
        result.add_done_callback(lambda f: self._on_child_done(child_id, f))
        return child_id, started, result

    def _on_child_done(self, child_id: str, fut: asyncio.Future[Any]) -> None:
        # the workflow stopped waiting for its child (its task was cancelled): cancel the child too
        if fut.cancelled() and child_id in self._children and not self.closed:
            self._unmatched.append(("RequestCancelExternalWorkflowExecution", {"workflow_id": child_id}))

    def _resolve_child(self, seq: int, kind: str, attrs: dict[str, Any]) -> None:
        entry = self._children.get(attrs["workflow_id"])
        if entry is None:
            raise NonDeterminismError(
                f"workflow {self.info.workflow_type} ({self.info.workflow_id}): history event {seq} ({kind}) is "
                f"about child {attrs['workflow_id']!r} that the code never started"
            )
        started, result = entry
        if kind == "ChildWorkflowExecutionStarted":
            if not started.done():
                started.set_result(attrs["run_id"])
            return
        del self._children[attrs["workflow_id"]]
        result_fn = self._result_fns.pop(("child", attrs["workflow_id"]), None)
        if kind == "ChildWorkflowExecutionCompleted":
            if not started.done():
                started.set_result(attrs["run_id"])
            if not result.done():
                self._settle(result, attrs["result"], result_fn, method=True)
            return
        err = child_error(kind, attrs, self.converter)
        if not started.done():
            started.set_exception(err)
            started.exception()  # whoever awaits the start sees it; nobody must await it
        if not result.done():
            result.set_exception(err)

    def start_timer(
        self, delay_s: float, callback: Callable[..., object], args: tuple[Any, ...], *, fire_at_ms: int | None = None
    ) -> DurableTimerHandle:
        """A durable timer (what ``asyncio.sleep`` and ``workflow.sleep`` use on this loop);
        ``fire_at_ms``: at that instant, wherever the command is applied (``workflow.sleep_until``)."""
        if self.closed:
            raise RuntimeError("workflow already completed")
        self._next_timer += 1
        timer_id = str(self._next_timer)
        handle = DurableTimerHandle(
            self.loop, timer_id, callback, args, cancel=self._cancel_timer, drop=lambda tid: self._timers.pop(tid, None)
        )
        self._timers[timer_id] = handle
        attrs: dict[str, Any] = {"timer_id": timer_id, "duration_ms": max(0, int(delay_s * 1000))}
        if fire_at_ms is not None:  # (left out otherwise: a process pinned to schema 21 writes the rest)
            attrs["fire_at_ms"] = fire_at_ms
        self._unmatched.append(("StartTimer", attrs))
        return handle

    @property
    def now_ms(self) -> int:
        """Workflow time, epoch ms (the time the current workflow task was scheduled)."""
        return self._now_ms

    def _cancel_timer(self, timer_id: str) -> None:
        if self._timers.pop(timer_id, None) is not None and not self.closed:
            self._unmatched.append(("CancelTimer", {"timer_id": timer_id}))
            # it may have fired already, after this task was scheduled: that fire is then nothing
            self._canceled_timers[timer_id] = None

    def wait_condition(self, fn: Callable[[], object]) -> asyncio.Future[Any]:
        fut = self.loop.create_future()
        if fn():
            fut.set_result(None)
        else:
            self._conditions.append((fn, fut))
        return fut

    def record(self, ctype: str, attrs: dict[str, Any]) -> None:
        """A command without a result (markers, search attributes)."""
        self._unmatched.append((ctype, attrs))

    # -- driving -------------------------------------------------------------------------------

    def apply(self, events: Sequence[Mapping[str, Any]], scheduled_seq: int) -> list[tuple[str, dict[str, Any]]]:
        """Consume a task's events; return the commands of the live activation (maybe empty)."""
        commands: list[tuple[str, dict[str, Any]]] = []
        for index, ev in enumerate(events):
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
            if kind not in INLINE_EVENT_TYPES:
                self._end_matching(seq, kind)
            if kind in RESOLUTIONS:
                self._resolutions.append((seq, kind, attrs))
            elif kind == "WorkflowTaskScheduled":
                self._wt_times[seq] = ev["timestamp_ms"]
                if seq == scheduled_seq:
                    self.replaying = False
                    self._activate(seq)
                    commands = list(self._unmatched)
            elif kind == "WorkflowTaskCompleted":
                if self._activated_for != attrs["scheduled_seq"]:
                    # a past workflow task: the markers it recorded tell patched() which path ran
                    self._recorded_markers = self._markers_after(events, index)
                    self._replaying_activation = True
                    try:
                        self._activate(attrs["scheduled_seq"])
                    finally:
                        self._replaying_activation = False
                        self._recorded_markers = {}
                self._matching = True
        return commands

    # -- eager workflow tasks (decision 0031) ----------------------------------------------

    def can_run_eager(self) -> bool:
        """Is this instance exactly where its last live workflow task left it?"""
        return (
            not self.closed
            and not self.replaying
            and not self._matching
            and self._activated_for == self.last_seq
            and self._main is not None
        )

    def run_eager(
        self, activity_id: str, scheduled_seq: int, attempt: int, result: bytes, now_ms: int, token: str
    ) -> tuple[dict[str, Any], int, list[tuple[str, dict[str, Any]]]]:
        """Run the workflow task that an activity's result would cause, without waiting for the
        engine to send it: the last task's commands are taken as recorded (the engine refuses the
        eager task if anything else happened since), the result resolves the activity and the
        code runs live. Returns (what the task follows: ``base_scheduled_seq`` and
        ``base_request_id``, the workflow time used, the commands). Event numbers are provisional
        until ``confirm_eager``; eager tasks can follow each other before it."""
        base = self.last_seq
        follows = (
            {"base_scheduled_seq": base, "base_request_id": None}
            if self.eager_token is None
            else {"base_scheduled_seq": -1, "base_request_id": self.eager_token}
        )
        self._unmatched.clear()
        self._resolutions.append(
            (
                base + 1,
                "ActivityTaskCompleted",
                {
                    "activity_id": activity_id,
                    "scheduled_seq": scheduled_seq,
                    "attempt": attempt,
                    "result": result,
                    "identity": "",
                },
            )
        )
        at = max(now_ms, self._now_ms)  # workflow time never goes back
        self.last_seq = base + 2
        self._wt_times[base + 2] = at
        self.eager_token = token
        self._activate(base + 2)
        if self.pending_local_activities():
            # an eager task is sent with the activity's result, before the worker could run them:
            # the caller forgets this instance, and the engine's workflow task runs them
            raise LocalActivitiesPending("the eager workflow task calls local activities")
        return follows, at, list(self._unmatched)

    def confirm_eager(self, first_event: Mapping[str, Any]) -> bool:
        """The next task's first event: is it the engine's record of the eager task (its
        WorkflowTaskCompleted carries the token)? If so, adopt the engine's event numbers."""
        kind, attrs = first_event["attributes"]
        if (
            self.eager_token is None
            or first_event.get("request_id") != self.eager_token
            or kind != "WorkflowTaskCompleted"
        ):
            return False
        self.last_seq = first_event["seq"] - 1
        self._activated_for = attrs["scheduled_seq"]
        self.eager_token = None
        return True

    @staticmethod
    def _markers_after(events: Sequence[Mapping[str, Any]], index: int) -> dict[str, bytes | None]:
        """The markers (name -> details) in the block of command events after ``events[index]``."""
        names: dict[str, bytes | None] = {}
        for ev in events[index + 1 :]:
            kind, attrs = ev["attributes"]
            if kind == "MarkerRecorded":
                names[attrs["name"]] = attrs.get("details")
            elif kind not in COMMAND_EVENT_TYPES and kind not in INLINE_EVENT_TYPES:
                break
        return names

    def patched(self, patch_id: str, *, deprecated: bool = False) -> bool:
        """Versioning: True on the new code path. New runs (and workflow tasks run live) take the
        new path and record a marker; replays take the path their history recorded."""
        name = f"patch:{patch_id}"
        if patch_id in self._patches:
            return self._patches[patch_id]
        recorded = name in self._recorded_markers
        taken = recorded if self._replaying_activation else True
        # a deprecated patch records nothing new, but echoes a marker its history already has
        if recorded if deprecated else taken:
            self._unmatched.append(("RecordMarker", {"name": name, "details": None}))
        self._patches[patch_id] = taken
        return taken

    def finish_replay(self) -> None:
        """At the end of a recorded history: commands the code produced that the history lacks
        are a divergence too."""
        self._end_matching(self.last_seq + 1, "the end of the history")

    def _end_matching(self, seq: int, kind: str) -> None:
        if self._matching:
            self._matching = False
            if self._unmatched:
                ckind, cattrs = self._unmatched[0]
                raise NonDeterminismError(
                    f"workflow {self.info.workflow_type} ({self.info.workflow_id}): the code produced "
                    f"{describe_command(ckind, cattrs)} but history event {seq} is {kind}; "
                    "the code changed in a way that is not replay-safe (use workflow.patched())"
                )

    def _match(self, seq: int, kind: str, attrs: dict[str, Any]) -> None:
        if not self._unmatched:
            raise NonDeterminismError(
                f"workflow {self.info.workflow_type} ({self.info.workflow_id}): history event {seq} is "
                f"{describe_command(kind, attrs)} but the code produced no such command "
                "(the code changed in a way that is not replay-safe; use workflow.patched())"
            )
        ckind, cattrs = self._unmatched.popleft()
        same = MATCHING_EVENT[ckind] == kind and all(cattrs[k] == attrs[k] for k in IDENTITY.get(kind, ()))
        if same and kind == "TimerCanceled" and attrs["timer_id"] in self._canceled_timers:
            self._canceled_timers[attrs["timer_id"]] = seq
        if not same:
            raise NonDeterminismError(
                f"workflow {self.info.workflow_type} ({self.info.workflow_id}): history event {seq} is "
                f"{describe_command(kind, attrs)} but the code produced {describe_command(ckind, cattrs)} "
                "(the code changed in a way that is not replay-safe; use workflow.patched())"
            )

    def _activate(self, scheduled_seq: int) -> None:
        self._activated_for = scheduled_seq
        # the same on replay: it is the task's place in the history
        self.info = dataclasses.replace(self.info, history_length=scheduled_seq)
        self._now_ms = self._wt_times.pop(scheduled_seq, self._now_ms)
        self.loop.set_time(self._now_ms / 1000)
        ready = [r for r in self._resolutions if r[0] < scheduled_seq]
        self._resolutions = [r for r in self._resolutions if r[0] >= scheduled_seq]
        for seq, kind, attrs in ready:
            self._resolve(seq, kind, attrs)
        # a racing fire precedes its cancel's event: resolved above if that event is before this task
        for timer_id, canceled_seq in list(self._canceled_timers.items()):
            if canceled_seq is not None and canceled_seq < scheduled_seq:
                del self._canceled_timers[timer_id]
        self._run_idle()
        if self._replaying_activation:
            self._replay_local_activities()

    def _run_idle(self) -> None:
        """Run the workflow until it waits for something outside this workflow task."""
        self.loop.run_until_idle()
        while self._check_conditions():
            self.loop.run_until_idle()
        if self.loop.errors:
            err = self.loop.errors[0]
            self.loop.errors.clear()
            raise err

    def _check_conditions(self) -> bool:
        """Resolve wait_condition futures whose condition now holds; True if any did."""
        fired = False
        with self.loop.active():  # conditions are workflow code (``workflow.all_handlers_finished``)
            for entry in list(self._conditions):
                fn, fut = entry
                if fut.done():
                    self._conditions.remove(entry)
                elif fn():
                    self._conditions.remove(entry)
                    fut.set_result(None)
                    fired = True
        return fired

    def _resolve(self, seq: int, kind: str, attrs: dict[str, Any]) -> None:
        if kind == "WorkflowExecutionStarted":
            self._started(attrs)
        elif kind == "WorkflowStartDebounced":
            # a later start joined the debounced run before its code ran: the code gets its input
            # (these events all precede the first workflow task, so the code has not begun)
            self._input = attrs["input"]
        elif kind == "TimerFired":
            self._timer_fired(seq, attrs)
        elif kind == "WorkflowSignaled":
            self._deliver_signal(attrs)
        elif kind == "WorkflowUpdateAccepted":
            self._deliver_update(attrs)
        elif kind == "WorkflowCancelRequested":
            self._cancel_requested = True
            if self._main is not None and not self._main.done():
                self._main.cancel()
        elif kind == "ActivityTaskCanceled":
            pass  # the workflow already stopped waiting for it
        elif kind in (
            "ChildWorkflowExecutionStarted",
            "StartChildWorkflowExecutionFailed",
            "ChildWorkflowExecutionCompleted",
            "ChildWorkflowExecutionFailed",
        ):
            self._resolve_child(seq, kind, attrs)
        else:
            self._resolve_activity(seq, kind, attrs)

    def _started(self, attrs: dict[str, Any]) -> None:
        """The run's start: its info (headers, memo, search attributes), then its code as a task."""
        memo = {}
        for k, v in (attrs.get("memo") or {}).items():
            try:
                memo[k] = self.converter.from_bytes(v, what=f"memo {k!r}")
            except SchemaError as exc:  # metadata: not a reason to fail the workflow's task
                log.warning("workflow %s: memo %r not readable here: %s", self.info.workflow_id, k, exc)
        self.info = replace(
            self.info,
            headers=dict(attrs.get("headers") or {}),
            memo=memo,
            search_attributes=from_wire(attrs.get("search_attributes")),
            cron_schedule=attrs.get("cron_schedule"),
        )
        self._obj = self.defn.cls()
        self._input = attrs["input"]
        self._main = self.loop.create_task(self._run(), name=f"workflow:{self.info.workflow_id}")
        self._main.add_done_callback(self._on_main_done)

    def _timer_fired(self, seq: int, attrs: dict[str, Any]) -> None:
        handle = self._timers.pop(attrs["timer_id"], None)
        if handle is None and attrs["timer_id"] in self._canceled_timers:
            # it fired while the task that canceled it was in flight (the engine recorded the
            # cancel as a no-op): the code had stopped waiting for it
            del self._canceled_timers[attrs["timer_id"]]
            return
        if handle is None:
            raise NonDeterminismError(
                f"workflow {self.info.workflow_type} ({self.info.workflow_id}): history event {seq} fires "
                f"timer {attrs['timer_id']!r} that the code never started"
            )
        handle.fire()

    def _resolve_activity(self, seq: int, kind: str, attrs: dict[str, Any]) -> None:
        """An activity's result (completed, failed, timed out) for the code that awaits it."""
        fut = self._activities.pop(attrs["activity_id"], None)
        result_fn = self._result_fns.pop(("activity", attrs["activity_id"]), None)
        if fut is None:
            raise NonDeterminismError(
                f"workflow {self.info.workflow_type} ({self.info.workflow_id}): history event {seq} "
                f"({kind}) resolves activity {attrs['activity_id']!r} that the code never scheduled"
            )
        if fut.done():
            return
        if kind == "ActivityTaskCompleted":
            self._settle(fut, attrs["result"], result_fn)
            return
        failure = attrs["failure"]
        if kind == "ActivityTaskTimedOut":
            message = f"activity {attrs['activity_id']} timed out ({attrs['timeout_type']})"
        else:
            message = f"activity {attrs['activity_id']} failed: {failure['type']}: {failure['message']}"
        err = ActivityError(message, activity_id=attrs["activity_id"], attempt=attrs["attempt"], failure=failure)
        err.__cause__ = self.converter.exception(failure)
        fut.set_exception(err)

    async def _run(self) -> Any:
        """The workflow's main coroutine: its arguments (the start's input, or the last debounced
        start's) typed first, so that input that does not match fails the run
        (``PayloadTypeError``, not retried) instead of its workflow task."""
        args = self.converter.args_from_bytes(
            self._input, self.defn.run_fn, method=True, what=f"workflow {self.info.workflow_type}"
        )
        return await self._handle("run", self.info.workflow_type, self.defn.run_fn, args)

    def _settle(
        self,
        fut: asyncio.Future[Any],
        data: bytes | None,
        result_fn: tuple[Callable[..., Any], str] | None,
        *,
        method: bool = False,
    ) -> None:
        """Resolve ``fut`` with a result typed by the return type of ``result_fn`` (the function,
        what it is); a result that does not match reaches the awaiting workflow code as
        ``PayloadTypeError``."""
        fn, what = result_fn if result_fn is not None else (None, "result")
        try:
            fut.set_result(self.converter.result_from_bytes(data, fn, method=method, what=what))
        except PayloadTypeError as exc:
            fut.set_exception(exc)

    def _on_main_done(self, task: asyncio.Task[Any]) -> None:
        self.closed = True
        for handle in list(self._timers.values()):
            handle.cancel_silently()
        if task.cancelled():
            self._unmatched.append(("CancelWorkflowExecution", {"details": None}))
            return
        exc = task.exception()
        if isinstance(exc, ContinueAsNew):
            self._unmatched.append(
                ("ContinueAsNewWorkflowExecution", {"input": self.converter.to_bytes(list(exc.run_args))})
            )
            return
        if isinstance(exc, asyncio.CancelledError) or (
            exc is not None and self._cancel_requested and isinstance(exc.__cause__, asyncio.CancelledError)
        ):
            self._unmatched.append(("CancelWorkflowExecution", {"details": None}))
            return
        if exc is None:
            self._unmatched.append(("CompleteWorkflowExecution", {"result": self.converter.to_bytes(task.result())}))
        elif isinstance(exc, self.failure_types):
            self._unmatched.append(("FailWorkflowExecution", {"failure": self.converter.failure(exc)}))
        else:
            # a bug to fix (or a payload this worker cannot decode: a codec missing or not the
            # one that wrote it), not the workflow's outcome: fail the workflow task; the run
            # stays open and its task is retried until a worker that can run it does
            self.closed = False
            self.loop.errors.append(exc)

    @property
    def silent(self) -> bool:
        """Whether what the run's code does now was done before (a replay, or a query's or an
        update validator's throw-away instance): its warnings and ``workflow.logger`` lines
        were written then, once."""
        return self.replaying or self.throwaway

    def discard(self) -> None:
        """Forget this instance (cache eviction) without running any more workflow code."""
        for task in self.loop.tasks():
            # evicted on purpose, not leaked (asyncio's own flag: typeshed leaves it out)
            task._log_destroy_pending = False  # type: ignore[attr-defined]
        self.loop.close()
