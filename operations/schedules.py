"""Schedules: a workflow (``kadence.Schedule`` on the task queue ``kadence-schedules``) per
schedule, that starts a run of its action at each time of its spec.

Why a workflow: every guarantee a schedule needs is one the engine already gives a run. Its
clock is a durable timer, so a time comes once however often the processor, the timer service
or the worker dies; each run it starts is a child start recorded in its history in the same
transaction as the decision, under the ID ``{base}-{time}``, so no time starts twice or is lost;
the runs' ends come back as the children's close events (no polling), which is what the overlap
policies need; and changes (pause, trigger, backfill, update, delete) are workflow updates,
checked by a validator before anything is written. ``describe`` is a query.

Runs are children with the ``abandon`` parent-close policy: deleting a schedule leaves its runs
running. The schedule continues as new every ``ACTIONS_PER_RUN`` actions; a run still going then
is watched by an activity (``kadence.schedules.wait``) in the next one, since its close event
goes to the run that started it. Cancelling or terminating the other runs (those overlap
policies) is an activity too, with a request ID per run, so a retried one acts once.

``kadence schedules worker`` (and ``kadence dev``) runs the workflow and its activities
(``schedule_activities(client)``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

from kadence import Client, RetryPolicy, activity, workflow
from kadence.topics.errors import ChildWorkflowError, WorkflowError
from kadence.topics.schedules import (
    SCHEDULE_ID_PREFIX,
    SCHEDULE_WORKFLOW_TYPE,
    ScheduleBackfill,
    ScheduleDescription,
    ScheduledRun,
    ScheduleRequest,
    ScheduleState,
    ScheduleWaiting,
    fire_time,
    next_fire,
    scheduled_workflow_id,
)

__all__ = ["ACTIONS_PER_RUN", "RECENT_KEPT", "Schedule", "schedule_activities"]

#: actions a run of the schedule takes before it continues as new (about 15 events each)
ACTIONS_PER_RUN = 200
#: closed runs a description lists (newest last)
RECENT_KEPT = 10
#: missed times counted one by one after an outage before the count jumps to the window's start
MISSED_COUNTED = 10_000
#: runs started at once (a backfill's): each start is a round trip to the child's shard
STARTS_AT_ONCE = 100
_CLOSED_BAD = ("failed", "timed_out")
_T = timedelta(minutes=5)
#: the patch (``workflow.patched``) of the wait on one timer per time (``Schedule._until``);
#: schedules whose history lacks it replay the wait they ran, which re-armed the timer at every wake
ONE_ALARM = "kadence.schedule.one-alarm"
_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))


def _now_ms() -> int:
    return int(workflow.now().timestamp() * 1000)


@workflow.defn(name=SCHEDULE_WORKFLOW_TYPE)
class Schedule:
    def __init__(self) -> None:
        self._s = ScheduleState(request=None)  # type: ignore[arg-type]  # set first thing in run
        self._woken = False
        self._deleted = False
        self._starting = 0
        self._actions_this_run = 0
        self._schedule_id = ""
        self._seen_ms = 0
        self._tasks: set[asyncio.Future[None]] = set()
        #: the timer of the next time (``_until``) and the time it fires at
        self._alarm: asyncio.Future[None] | None = None
        self._alarm_at: int | None = None

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- reads and changes -------------------------------------------------------------------

    @workflow.query
    def describe(self) -> ScheduleDescription:
        s = self._s
        upcoming: list[int] = []
        at = max(s.last_nominal_ms, self._seen_ms)  # a query reads no clock: the last task's time
        limit = 5 if s.request.remaining_actions is None else min(5, max(0, s.request.remaining_actions))
        while not s.paused and not self._deleted and len(upcoming) < limit:
            nxt = next_fire(s.request.spec, at)
            if nxt is None:
                break
            upcoming.append(nxt)
            at = nxt
        return ScheduleDescription(
            schedule_id=self._schedule_id,
            state=s,
            next_times_ms=upcoming,
            deleted=self._deleted,
        )

    def _wake(self) -> None:
        self._woken = True

    @workflow.update
    def pause(self, note: str = "") -> None:
        self._s.paused, self._s.note = True, note or "paused"
        self._wake()

    @workflow.update
    def unpause(self, note: str = "") -> None:
        self._s.paused, self._s.note = False, note
        self._s.last_nominal_ms = max(self._s.last_nominal_ms, _now_ms())  # the paused times do not fire
        self._wake()

    @workflow.update
    def trigger(self, overlap: str | None = None) -> int:
        """Take an action now (by ``overlap``, else the schedule's policy); its nominal time."""
        nominal = max(_now_ms(), self._s.last_trigger_ms + 1)
        self._s.last_trigger_ms = nominal
        self._take(nominal, overlap or self._s.request.policy.overlap)
        self._wake()
        return nominal

    @trigger.validator
    def _check_trigger(self, overlap: str | None = None) -> None:
        if overlap is not None:
            ScheduleBackfill(start_ms=0, end_ms=0, overlap=overlap).check()

    @workflow.update
    def backfill(self, backfill: ScheduleBackfill) -> int:
        """Take the spec's times from ``start_ms`` to ``end_ms`` now; how many there were."""
        overlap, taken = backfill.overlap or self._s.request.policy.overlap, 0
        at = next_fire(self._s.request.spec, backfill.start_ms - 1)
        while at is not None and at <= backfill.end_ms:
            self._take(at, overlap)
            taken += 1
            at = next_fire(self._s.request.spec, at)
        self._wake()
        return taken

    @backfill.validator
    def _check_backfill(self, backfill: ScheduleBackfill) -> None:
        backfill.check()

    @workflow.update
    def update(self, request: ScheduleRequest) -> None:
        """Replace the spec, action and policy (and the paused state and note)."""
        if self._s.paused and not request.paused:  # unpaused by it: the paused times do not fire
            self._s.last_nominal_ms = max(self._s.last_nominal_ms, _now_ms())
        self._s.request = request
        self._s.paused, self._s.note = request.paused, request.note
        self._wake()

    @update.validator
    def _check_update(self, request: ScheduleRequest) -> None:
        request.check()

    @workflow.update
    def delete(self) -> None:
        """End the schedule (its runs go on)."""
        self._deleted = True
        self._wake()

    # -- the loop ----------------------------------------------------------------------------

    @workflow.run
    async def run(self, state: ScheduleState) -> ScheduleState:
        self._s = state
        self._schedule_id = workflow.info().workflow_id[len(SCHEDULE_ID_PREFIX) :]
        if not state.last_nominal_ms:  # a new schedule: its first time is the first one after now
            state.last_nominal_ms = state.created_ms = _now_ms()
        for carried in state.running:  # runs started by an earlier run of this chain
            self._spawn(self._watch(carried))
            if carried.stopping:  # its stop may not have been sent: again (same request ID)
                self._spawn(self._stop(carried, carried.stopping))
        while not self._deleted:
            self._woken = False  # a wake from here on is seen by the wait below
            now = self._seen_ms = _now_ms()
            if state.paused:
                state.last_nominal_ms = max(state.last_nominal_ms, now)
            else:
                self._take_due(now)
            await self._start_waiting()
            if self._actions_this_run >= ACTIONS_PER_RUN and not self._starting:
                workflow.continue_as_new(state)
            done = state.paused or state.request.exhausted  # (limited actions used up: no timer)
            wake = None if done else next_fire(state.request.spec, state.last_nominal_ms)
            now = self._seen_ms = _now_ms()
            if workflow.patched(ONE_ALARM):
                fires = None if wake is None else fire_time(state.request.spec, workflow.info().workflow_id, wake)
                await self._until(fires)
                continue
            try:
                if wake is None:
                    await workflow.wait_condition(lambda: self._woken)
                else:
                    fires = fire_time(state.request.spec, workflow.info().workflow_id, wake)
                    await workflow.wait_condition(lambda: self._woken, timeout=max(0, fires - now) / 1000)
            except TimeoutError:
                pass
        return state

    async def _until(self, fires: int | None) -> None:
        """Wait for a wake or for the time ``fires`` (None: a wake only), on one timer per time.

        A wake that leaves the next time as it was (a run started or ended, a query-free update)
        keeps the timer armed. Waiting with ``wait_condition(..., timeout=...)`` instead canceled
        the timer at every wake and armed a new one: three timers a time for a schedule whose
        runs start and end between its times, the timer service's busiest load at 10,000
        schedules (docs/performance.md, session 62)."""
        if self._alarm is not None and fires != self._alarm_at:
            self._alarm.cancel()
            self._alarm = self._alarm_at = None
        if fires is not None and self._alarm is None:
            self._alarm_at = fires
            # at the time itself, however late this task is recorded (a duration would count
            # from when the engine records it: later by the task's time in queues, under load)
            self._alarm = asyncio.ensure_future(workflow.sleep_until(datetime.fromtimestamp(fires / 1000, UTC)))
        alarm = self._alarm
        await workflow.wait_condition(lambda: self._woken or (alarm is not None and alarm.done()))
        if alarm is not None and alarm.done():
            self._alarm = self._alarm_at = None

    def _take_due(self, now: int) -> None:
        """Every time of the spec that has fired by ``now``: taken by the overlap policy if within
        the catch-up window, counted as missed if older."""
        s, wf = self._s, workflow.info().workflow_id
        spec, window = s.request.spec, s.request.policy.catchup_window_ms
        counted = 0
        while True:
            at = next_fire(spec, s.last_nominal_ms)
            if at is None or fire_time(spec, wf, at) > now:
                return
            if now - at > window:
                s.missed_catchup += 1
                counted += 1
                s.last_nominal_ms = at
                if counted >= MISSED_COUNTED:  # a long outage: the rest are not counted one by one
                    s.last_nominal_ms = max(at, now - window - 1)
                continue
            s.last_nominal_ms = at
            self._take(at, s.request.policy.overlap)

    def _take(self, nominal: int, overlap: str) -> None:
        """A time's action, by ``overlap``: waiting to start, or skipped."""
        s = self._s
        if s.request.exhausted:  # its limited actions are used up: no time is taken any more
            return
        busy = bool(s.running) or bool(self._s.waiting)
        if overlap == "skip" and busy:
            s.skipped_overlap += 1
            return
        if overlap == "buffer_one" and busy and any(p.overlap == "buffer_one" for p in self._s.waiting):
            s.skipped_overlap += 1
            return
        if overlap in ("cancel_other", "terminate_other"):
            # the newest replaces any still waiting for the others to end
            dropped = [p for p in self._s.waiting if p.overlap == overlap]
            s.skipped_overlap += len(dropped)
            self._s.waiting = [p for p in self._s.waiting if p.overlap != overlap]
            how = "terminate" if overlap == "terminate_other" else "cancel"
            for run in s.running:
                if not run.stopping:
                    run.stopping = how
                    self._spawn(self._stop(run, how))
        self._s.waiting.append(ScheduleWaiting(nominal, overlap))

    def _startable(self) -> bool:
        if not self._s.waiting:
            return False
        return self._s.waiting[0].overlap == "allow_all" or (not self._s.running and not self._starting)

    async def _start_waiting(self) -> None:
        """Start the waiting actions that their policies allow, in order."""
        while self._startable():
            if self._s.waiting[0].overlap == "allow_all":
                batch: list[ScheduleWaiting] = []
                while self._s.waiting and self._s.waiting[0].overlap == "allow_all" and len(batch) < STARTS_AT_ONCE:
                    batch.append(self._s.waiting.pop(0))
            else:
                batch = [self._s.waiting.pop(0)]
            await asyncio.gather(*(self._start(p.nominal_ms) for p in batch))

    async def _start(self, nominal: int) -> None:
        s = self._s
        action = s.request.action
        base = action.workflow_id or self._schedule_id
        run = ScheduledRun(nominal_ms=nominal, workflow_id=scheduled_workflow_id(base, nominal), started_ms=_now_ms())
        limited = s.request.remaining_actions is not None
        if limited:  # one of the limited actions, taken before the start (starts run side by side)
            if s.request.exhausted:
                return
            s.request.remaining_actions = (s.request.remaining_actions or 0) - 1
        self._starting += 1
        try:
            handle = await workflow.start_child_workflow(
                action.workflow_type,
                *action.args,
                id=run.workflow_id,
                task_queue=action.task_queue,
                parent_close_policy="abandon",
                run_timeout=timedelta(milliseconds=action.run_timeout_ms) if action.run_timeout_ms else None,
            )
        except ChildWorkflowError as exc:  # its ID is running (a backfill over a running time)
            run.status = "start_failed"
            run.message = str(exc)
            self._record(run)
            if limited:  # nothing started: the action is not used up
                s.request.remaining_actions = (s.request.remaining_actions or 0) + 1
            return
        finally:
            self._starting -= 1
        run.run_id = handle.run_id
        s.actions += 1
        self._actions_this_run += 1
        s.running.append(run)
        self._spawn(self._closed(run, handle))

    async def _closed(self, run: ScheduledRun, handle: workflow.ChildWorkflowHandle) -> None:
        try:
            await handle.result()
            status = "completed"
        except ChildWorkflowError as exc:
            status = exc.status or "failed"
        self._ended(run, status)

    async def _watch(self, run: ScheduledRun) -> None:
        status = await workflow.execute_activity(
            "kadence.schedules.wait",
            run.workflow_id,
            run.run_id,
            start_to_close_timeout=timedelta(days=3650),
            heartbeat_timeout=timedelta(minutes=1),
            retry_policy=_RETRY,
            result_type=str,
        )
        self._ended(run, status)

    async def _stop(self, run: ScheduledRun, how: str) -> None:
        await workflow.execute_activity(
            "kadence.schedules.stop",
            run.workflow_id,
            run.run_id,
            how,
            f"schedule {self._schedule_id}: a later time's run replaces it",
            start_to_close_timeout=_T,
            retry_policy=_RETRY,
        )

    def _ended(self, run: ScheduledRun, status: str) -> None:
        s = self._s
        run.status, run.stopping = status, ""
        s.running = [r for r in s.running if r.workflow_id != run.workflow_id or r.run_id != run.run_id]
        self._record(run)
        if status in _CLOSED_BAD and s.request.policy.pause_on_failure and not s.paused:
            s.paused, s.note = True, f"paused: run {run.workflow_id} {status}"
        self._wake()

    def _record(self, run: ScheduledRun) -> None:
        self._s.recent = [*self._s.recent, run][-RECENT_KEPT:]


def schedule_activities(client: Client) -> list[Callable[..., Any]]:
    """The schedule's activities, bound to ``client``: stop a run (the cancel and terminate overlap
    policies), and wait for a run a previous run of the schedule started."""

    @activity.defn(name="kadence.schedules.stop")
    async def stop(workflow_id: str, run_id: str | None, how: str, reason: str) -> None:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        request_id = f"schedule-{how}:{workflow_id}:{run_id}"
        try:
            if how == "terminate":
                await handle.terminate(reason=reason, request_id=request_id)
            else:
                await handle.cancel(reason=reason, request_id=request_id)
        except WorkflowError:  # it has closed meanwhile: nothing to stop
            pass

    @activity.defn(name="kadence.schedules.wait")
    async def wait(workflow_id: str, run_id: str | None) -> str:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        while True:
            try:
                status = (await handle.describe()).status
            except WorkflowError:
                return "unknown"
            if status != "running":
                return status
            activity.heartbeat(status)
            await asyncio.sleep(5)

    return [stop, wait]
