"""The schedule workflow's logic on ``kadence.testing`` (time skipped, no broker): each time of the
spec starts one run with the ID of its time, the overlap policies, the catch-up window, pause,
trigger, backfill, update and delete, and continue-as-new with runs still going. The broker test
is tests/integration/test_schedules.py."""

from __future__ import annotations

import pytest

from kadence import (
    InvalidArgumentError,
    ScheduleAlreadyRunningError,
    ScheduleInterval,
    ScheduleNotFoundError,
    SchedulePolicy,
    ScheduleSpec,
    activity,
    schedule_action,
    workflow,
)
from kadence.operations import Schedule
from kadence.testing import WorkflowEnvironment

RAN: list[str] = []
STOPPED: list[tuple[str, str]] = []


@workflow.defn
class Job:
    @workflow.run
    async def run(self, label: str, seconds: float) -> str:
        RAN.append(workflow.info().workflow_id)
        await workflow.sleep(seconds)
        return label


@activity.defn(name="kadence.schedules.stop")
async def stop(workflow_id: str, run_id: str | None, how: str, reason: str) -> None:
    STOPPED.append((workflow_id, how))


@activity.defn(name="kadence.schedules.wait")
async def wait(workflow_id: str, run_id: str | None) -> str:
    # the real one waits for the run to end (tests/integration/test_schedules.py); the test
    # environment skips time only while no activity runs, so this one answers at once
    WAITED.append(workflow_id)
    return "completed"


WAITED: list[str] = []


def env() -> WorkflowEnvironment:
    RAN.clear()
    STOPPED.clear()
    WAITED.clear()
    return WorkflowEnvironment(workflows=[Schedule, Job], activities=[stop, wait])


MINUTE = ScheduleSpec(intervals=[ScheduleInterval(every_ms=60_000)])


async def test_each_time_starts_one_run_named_for_its_time():
    async with env() as e:
        await _one_second_past_a_minute(e)
        handle = await e.client.create_schedule(
            "nightly", spec=MINUTE, action=schedule_action(Job, "x", 1.0, task_queue="jobs")
        )
        await e.sleep(5 * 60)
        desc = await handle.describe()
    assert len(RAN) == 5 and len(set(RAN)) == 5, RAN
    assert all(r.startswith("nightly-") and r.endswith(":00Z") for r in RAN), RAN
    assert desc.state.actions == 5 and desc.state.skipped_overlap == 0
    assert [r.status for r in desc.state.recent] == ["completed"] * 5
    assert len(desc.next_times_ms) == 5 and desc.next_times_ms[0] % 60_000 == 0


async def _one_second_past_a_minute(e: WorkflowEnvironment, period_ms: int = 60_000) -> None:
    """Sleep until the environment's clock is 1 s past a whole minute (or ``period_ms``): the
    times below then fall at known moments, never at the same instant as a run's end (time is
    skipped, not waited)."""
    ms = int(e.now().timestamp() * 1000)
    await e.sleep(((period_ms + 1000 - ms % period_ms) % period_ms or period_ms) / 1000)


def _ids(prefix: str) -> list[str]:
    return [r for r in RAN if r.startswith(prefix)]


@pytest.mark.parametrize(
    ("overlap", "started", "skipped"),
    [
        # runs of 130 s, a time every minute, for 10 minutes
        ("skip", 4, 6),  # the times of minutes 1, 4, 7, 10 (each skips the two while it runs)
        ("allow_all", 10, 0),
        # 1 at once; 2 waits and starts when 1 ends, 3 is dropped; then 4, 6, 8 the same (10 waits)
        ("buffer_one", 5, 4),
    ],
)
async def test_overlap_policies(overlap, started, skipped):
    async with env() as e:
        await _one_second_past_a_minute(e)
        handle = await e.client.create_schedule(
            f"o-{overlap}",
            spec=MINUTE,
            action=schedule_action(Job, "x", 130.0, task_queue="jobs"),
            policy=SchedulePolicy(overlap=overlap),
        )
        await e.sleep(10 * 60 + 1)
        desc = await handle.describe()
    assert (len(_ids(f"o-{overlap}")), desc.state.skipped_overlap) == (started, skipped), (RAN, desc.state)
    assert len(set(RAN)) == len(RAN)


async def test_buffer_all_runs_every_time_one_after_another():
    async with env() as e:
        await _one_second_past_a_minute(e)
        handle = await e.client.create_schedule(
            "ba",
            spec=MINUTE,
            action=schedule_action(Job, "x", 95.0, task_queue="jobs"),
            policy=SchedulePolicy(overlap="buffer_all"),
        )
        await e.sleep(6 * 60)
        desc = await handle.describe()
    # 95 s runs back to back from minute 1: the times of 1, 2, 3, 4 ran (the last from 5:45),
    # those of 5 and 6 wait
    assert len(RAN) == 4 and desc.state.skipped_overlap == 0
    assert len(desc.state.waiting) == 2 and len(desc.state.running) == 1, desc.state
    assert sorted(RAN) == RAN  # started in the order of their times


@pytest.mark.parametrize("overlap", ["cancel_other", "terminate_other"])
async def test_cancel_or_terminate_other_stops_the_running_run(overlap):
    async with env() as e:
        await _one_second_past_a_minute(e)
        await e.client.create_schedule(
            "co",
            spec=MINUTE,
            action=schedule_action(Job, "x", 30.0, task_queue="jobs"),
            policy=SchedulePolicy(overlap=overlap),
        )
        await e.sleep(2 * 60 + 10)
        assert STOPPED == []  # 30 s runs never overlap a minute's time
    async with env() as e:
        await _one_second_past_a_minute(e)
        await e.client.create_schedule(
            "co",
            spec=MINUTE,
            action=schedule_action(Job, "x", 3600.0, task_queue="jobs"),
            policy=SchedulePolicy(overlap=overlap),
        )
        await e.sleep(60 + 1)
        assert len(RAN) == 1
        await e.sleep(60)
    how = "terminate" if overlap == "terminate_other" else "cancel"
    assert STOPPED == [(RAN[0], how)]


async def test_times_missed_beyond_the_catch_up_window_are_counted_not_run():
    from kadence.topics.schedules import SCHEDULE_WORKFLOW_TYPE, ScheduleRequest, ScheduleState

    window = 5 * 60_000 + 30_000
    async with env() as e:
        await _one_second_past_a_minute(e)
        real = int(e.now().timestamp() * 1000)
        now = real // 60_000 * 60_000
        state = ScheduleState.new(
            ScheduleRequest(
                spec=MINUTE,
                action=schedule_action(Job, "x", 1.0, task_queue="jobs"),
                policy=SchedulePolicy(overlap="allow_all", catchup_window_ms=window),
            )
        )
        # as if its worker had been down for an hour: 60 times passed
        state.last_nominal_ms = state.created_ms = now - 60 * 60_000
        await e.client.start_workflow(
            SCHEDULE_WORKFLOW_TYPE, state, id="kadence-schedule:late", task_queue="kadence-schedules"
        )
        await e.sleep(1)
        desc = await e.client.get_schedule_handle("late").describe()
    # it woke 1 s past the minute: the times of the last 5.5 minutes ran (6), the 54 before were missed
    assert 1000 <= real - now < 2000
    assert (desc.state.missed_catchup, len(RAN)) == (54, 6), (desc.state.missed_catchup, RAN)


async def test_pause_trigger_backfill_update_and_delete():
    async with env() as e:
        await _one_second_past_a_minute(e, 3_600_000)  # the hourly spec below fires in none of it
        handle = await e.client.create_schedule(
            "ops", spec=MINUTE, action=schedule_action(Job, "x", 1.0, task_queue="jobs"), paused=True, note="not yet"
        )
        await e.sleep(3 * 60)
        desc = await handle.describe()
        assert RAN == [] and desc.state.paused and desc.state.note == "not yet" and desc.next_times_ms == []
        nominal = await handle.trigger()
        await e.sleep(1)
        assert RAN == [f"ops-{_iso(nominal)}"]
        await handle.unpause("go")
        await e.sleep(60)
        assert len(RAN) == 2  # the paused minutes did not fire later
        base = int(e.now().timestamp() * 1000) // 60_000 * 60_000 - 24 * 3_600_000
        assert await handle.backfill(base, base + 9 * 60_000, overlap="allow_all") == 10
        await e.sleep(1)
        assert len(_ids("ops-")) == 12
        await handle.update(spec=ScheduleSpec(intervals=[ScheduleInterval(every_ms=3_600_000)]))
        await e.sleep(10 * 60)
        assert len(RAN) == 12  # hourly now
        await handle.delete()
        await e.sleep(1)
        with pytest.raises(ScheduleNotFoundError):
            await handle.describe()
        with pytest.raises(ScheduleNotFoundError):
            await handle.pause()
        # the ID is free again
        await e.client.create_schedule("ops", spec=MINUTE, action=schedule_action(Job, "x", 1.0, task_queue="jobs"))


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    base = datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{ms % 1000:03d}Z" if ms % 1000 else f"{base}Z"


async def test_bad_input_is_refused_before_anything_is_written():
    async with env() as e:
        action = schedule_action(Job, "x", 1.0, task_queue="jobs")
        with pytest.raises(InvalidArgumentError, match="at least one cron"):
            await e.client.create_schedule("bad", spec=ScheduleSpec(), action=action)
        with pytest.raises(InvalidArgumentError, match="not five fields"):
            await e.client.create_schedule("bad", spec=ScheduleSpec(cron=["61 * * * *"]), action=action)
        with pytest.raises(InvalidArgumentError, match="unknown time zone"):
            await e.client.create_schedule(
                "bad", spec=ScheduleSpec(cron=["@daily"], time_zone="Mars/Base"), action=action
            )
        with pytest.raises(InvalidArgumentError, match="overlap must be one of"):
            await e.client.create_schedule("bad", spec=MINUTE, action=action, policy=SchedulePolicy(overlap="some"))
        with pytest.raises(InvalidArgumentError, match="task queue"):
            schedule_action(Job, task_queue="no spaces")
        handle = await e.client.create_schedule("good", spec=MINUTE, action=action)
        with pytest.raises(ScheduleAlreadyRunningError):
            await e.client.create_schedule("good", spec=MINUTE, action=action)
        with pytest.raises(InvalidArgumentError, match="ends before it starts"):
            await handle.backfill(10, 5)
        with pytest.raises(InvalidArgumentError, match="overlap must be one of"):
            await handle.trigger(overlap="nope")
        assert (await handle.describe()).state.actions == 0


async def test_a_schedule_continues_as_new_and_keeps_watching_its_runs(monkeypatch):
    from kadence.operations import schedules

    monkeypatch.setattr(schedules, "ACTIONS_PER_RUN", 3)
    async with env() as e:
        await _one_second_past_a_minute(e)
        handle = await e.client.create_schedule(
            "long",
            spec=MINUTE,
            action=schedule_action(Job, "x", 150.0, task_queue="jobs"),
            policy=SchedulePolicy(overlap="allow_all"),
        )
        await e.sleep(10 * 60 + 1)
        desc = await handle.describe()
        history = await e.client.get_workflow_handle("kadence-schedule:long").history()
    assert len(RAN) == 10 and len(set(RAN)) == 10
    assert history[0]["attributes"]["continued_from_run_id"]  # it continued as new
    assert desc.state.actions == 10
    # each continue-as-new (after 3 actions, at minute 3: the runs of minutes 1-3 still going)
    # hands them to the next run's watcher
    assert WAITED[:3] == RAN[:3] and len(set(WAITED)) == len(WAITED), (WAITED, RAN)


async def test_jitter_delays_each_time_by_a_fixed_amount_within_the_bound():
    async with env() as e:
        await _one_second_past_a_minute(e)
        handle = await e.client.create_schedule(
            "jit",
            spec=ScheduleSpec(intervals=[ScheduleInterval(every_ms=60_000)], jitter_ms=20_000),
            action=schedule_action(Job, "x", 1.0, task_queue="jobs"),
        )
        await e.sleep(10 * 60)
        desc = await handle.describe()
    assert len(RAN) >= 9 and len(set(RAN)) == len(RAN)
    assert all(r.endswith(":00Z") for r in RAN)  # the IDs stay the nominal times
    assert all(0 <= run.started_ms - run.nominal_ms <= 20_000 + 1000 for run in desc.state.recent)
    assert len({run.started_ms - run.nominal_ms for run in desc.state.recent}) > 1


async def test_an_update_that_unpauses_does_not_run_the_paused_times():
    async with env() as e:
        await _one_second_past_a_minute(e)
        handle = await e.client.create_schedule(
            "upd", spec=MINUTE, action=schedule_action(Job, "x", 1.0, task_queue="jobs"), paused=True
        )
        await e.sleep(5 * 60)
        await handle.update(paused=False, note="resumed")
        await e.sleep(1)
        assert RAN == []  # the five paused minutes stay skipped
        await e.sleep(60)
        desc = await handle.describe()
    assert len(RAN) == 1 and (desc.state.paused, desc.state.note) == (False, "resumed")


async def test_one_timer_a_time_however_often_the_schedule_wakes_between_times():
    """A run that starts and ends between two times wakes the schedule twice; the timer of the
    next time stays armed (before: canceled and armed again at each wake, three a time)."""
    from kadence.topics.schedules import schedule_workflow_id

    async with env() as e:
        await _one_second_past_a_minute(e)
        await e.client.create_schedule("steady", spec=MINUTE, action=schedule_action(Job, "x", 5.0, task_queue="jobs"))
        await e.sleep(10 * 60 + 30)  # ten times, each run done 5 s after its start
        events = await e.client.get_workflow_handle(schedule_workflow_id("steady")).history()
    kinds = [ev["type"] for ev in events]
    ran = len(RAN)
    assert ran == 10, RAN
    # one timer per time, plus the one armed for the time after the last (still pending)
    assert kinds.count("TimerStarted") == ran + 1, kinds.count("TimerStarted")
    assert kinds.count("TimerCanceled") == 0
    assert kinds.count("MarkerRecorded") == 1  # the patch, once per run of the schedule


async def test_a_schedule_that_waited_the_old_way_replays_on_the_new_code(monkeypatch):
    from kadence import Replayer
    from kadence import workflow as wf_module
    from kadence.topics.schedules import schedule_workflow_id

    real = wf_module.patched
    monkeypatch.setattr(
        wf_module, "patched", lambda patch_id, **kw: False if patch_id.startswith("kadence.") else real(patch_id, **kw)
    )
    async with env() as e:  # the code before the patch: no marker, a timer re-armed at each wake
        await _one_second_past_a_minute(e)
        await e.client.create_schedule("older", spec=MINUTE, action=schedule_action(Job, "x", 5.0, task_queue="jobs"))
        await e.sleep(3 * 60 + 30)
        raw = await e.client.get_workflow_handle(schedule_workflow_id("older")).history(raw=True)
    monkeypatch.undo()
    assert not any(ev["attributes"][0] == "MarkerRecorded" for ev in raw)
    assert sum(ev["attributes"][0] == "TimerCanceled" for ev in raw) >= 3
    assert Replayer(workflows=[Schedule, Job]).replay(raw).ok  # the new code takes the old path


async def test_limited_actions_start_that_many_runs_and_an_update_gives_more():
    async with env() as e:
        await _one_second_past_a_minute(e, 3_600_000)
        handle = await e.client.create_schedule(
            "limited", spec=MINUTE, action=schedule_action(Job, "x", 1.0, task_queue="jobs"), remaining_actions=3
        )
        await e.sleep(6 * 60)
        desc = await handle.describe()
        assert len(_ids("limited-")) == 3, RAN
        assert desc.state.request.remaining_actions == 0 and desc.state.actions == 3 and desc.next_times_ms == []
        await handle.trigger()  # used up: a trigger starts nothing either
        await e.sleep(1)
        assert len(_ids("limited-")) == 3
        await handle.update(remaining_actions=2)  # two more, then none
        assert len((await handle.describe()).next_times_ms) == 2
        await e.sleep(5 * 60)
        assert len(_ids("limited-")) == 5
        await handle.update(note="unchanged limit")  # an update that leaves the limit keeps it
        assert (await handle.describe()).state.request.remaining_actions == 0
        with pytest.raises(InvalidArgumentError, match="remaining actions"):
            await handle.update(remaining_actions=-1)
