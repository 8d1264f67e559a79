"""Schedules on the real broker (issue 47): a schedule every second keeps exactly one run per
second through a SIGKILL of the processor and one of the timer service (the times missed while
they were down catch up, by the policy); a backfill of a day at one a minute starts 1,440 runs,
each once; ``cancel_other`` really cancels the run it replaces; the CLI creates, describes,
triggers and deletes one. The policies' logic is tests/unit/test_schedule_workflow.py."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid

from kadence import KadenceError, ScheduleInterval, SchedulePolicy, ScheduleSpec, Worker, schedule_action, workflow
from kadence.operations import Schedule, schedule_activities
from kadence.topics.schedules import SCHEDULES_TASK_QUEUE, schedule_workflow_id, scheduled_workflow_id

from .conftest import wait_until

SECOND = ScheduleSpec(intervals=[ScheduleInterval(every_ms=1000)])


@workflow.defn
class Tick:
    @workflow.run
    async def run(self, seconds: float) -> str:
        if seconds:
            await workflow.sleep(seconds)
        return workflow.info().run_id


def _workers(client):
    return (
        Worker(client, task_queue=SCHEDULES_TASK_QUEUE, workflows=[Schedule], activities=schedule_activities(client)),
        Worker(client, task_queue="ticks", workflows=[Tick]),
    )


async def _initiated(client, schedule_id: str) -> list[tuple[str, int]]:
    """Every run the schedule's history records starting, through its continue-as-new chain:
    (the run's workflow ID, the seq of the start in its schedule run)."""
    out: list[tuple[str, int]] = []
    run_id = None
    while True:
        events = await client.get_workflow_handle(schedule_workflow_id(schedule_id), run_id=run_id).history()
        out += [
            (e["attributes"]["workflow_id"], e["seq"])
            for e in events
            if e["type"] == "StartChildWorkflowExecutionInitiated"
        ]
        run_id = events[0]["attributes"].get("continued_from_run_id")
        if not run_id:
            return out


async def test_a_schedule_every_second_survives_a_processor_and_a_timer_service_kill(client, processors):
    processors.start()
    processors.start_timers()
    a, b = _workers(client)
    async with a, b:
        handle = await client.create_schedule(
            "every-second",
            spec=SECOND,
            action=schedule_action(Tick, 0.0, task_queue="ticks"),
            policy=SchedulePolicy(overlap="allow_all"),
        )
        await wait_until(lambda: _actions(handle, 5), 60, "five runs")
        processors.kill()
        await asyncio.sleep(3)
        processors.start("p1")
        await wait_until(lambda: _actions(handle, 15), 90, "runs after the processor's restart")
        processors.kill_timers()
        await asyncio.sleep(3)
        processors.start_timers("t1")
        await wait_until(lambda: _actions(handle, 25), 90, "runs after the timer service's restart")
        await handle.pause("test over")
        desc = await handle.describe()
        started = await _initiated(client, "every-second")
        # every run it started ran to its end, under its own ID, once
        results = await asyncio.gather(*(client.get_workflow_handle(wf).result(timeout=60) for wf, _ in started))
    ids = [wf for wf, _ in started]
    assert len(ids) == len(set(ids)) == desc.state.actions >= 25
    # one run per second: the runs' IDs are the consecutive seconds from the first to the last
    first = desc.state.created_ms // 1000 * 1000 + 1000
    assert ids == [scheduled_workflow_id("every-second", first + i * 1000) for i in range(len(ids))]
    assert desc.state.missed_catchup == 0 and desc.state.skipped_overlap == 0
    # the run each ID names is the one the schedule started (a second start would be another run)
    described = await asyncio.gather(*(client.get_workflow_handle(wf).describe() for wf in ids))
    assert [d.run_id for d in described] == results


async def _actions(handle, n: int) -> bool:
    try:
        return (await handle.describe()).state.actions >= n
    except KadenceError:  # the processor is down, or its shard not yet restored: not yet
        return False


async def test_a_backfill_of_a_day_at_one_a_minute_starts_1440_runs_once(client, processors):
    processors.start()
    processors.start_timers()
    day = 86_400_000
    start = (int(time.time() * 1000) // day - 3) * day  # a whole day, three days ago
    a, b = _workers(client)
    async with a, b:
        handle = await client.create_schedule(
            "backfill",
            spec=ScheduleSpec(intervals=[ScheduleInterval(every_ms=60_000)]),
            action=schedule_action(Tick, 0.0, task_queue="ticks"),
            paused=True,  # only the backfill's runs
        )
        t0 = time.monotonic()
        assert await handle.backfill(start, start + day - 1, overlap="allow_all") == 1440
        await wait_until(lambda: _actions(handle, 1440), 240, "1,440 runs")
        took = time.monotonic() - t0
        started = await _initiated(client, "backfill")
        ids = [wf for wf, _ in started]
        await asyncio.gather(*(client.get_workflow_handle(wf).result(timeout=120) for wf in ids[-50:]))
    print(f"a backfill of 1,440 runs started them in {took:.1f} s")
    assert sorted(ids) == [scheduled_workflow_id("backfill", start + i * 60_000) for i in range(1440)]


async def test_cancel_other_cancels_the_run_it_replaces(client, processors):
    processors.start()
    processors.start_timers()
    a, b = _workers(client)
    async with a, b:
        handle = await client.create_schedule(
            "replace",
            spec=ScheduleSpec(intervals=[ScheduleInterval(every_ms=3_600_000)]),
            action=schedule_action(Tick, 3600.0, task_queue="ticks"),
            policy=SchedulePolicy(overlap="cancel_other"),
        )
        first = await handle.trigger()
        await wait_until(lambda: _running(handle, 1), 30, "the first run")
        second = await handle.trigger()
        await wait_until(lambda: _status(client, "replace", first, "canceled"), 30, "the first run canceled")
        await wait_until(lambda: _running(handle, 1), 30, "the second run")
        desc = await handle.describe()
        await handle.delete()
    assert [r.workflow_id for r in desc.state.running] == [scheduled_workflow_id("replace", second)]
    assert [(r.workflow_id, r.status) for r in desc.state.recent if r.status != "running"] == [
        (scheduled_workflow_id("replace", first), "canceled")
    ]


async def _running(handle, n: int) -> bool:
    return len((await handle.describe()).state.running) == n


async def _status(client, schedule_id: str, nominal: int, status: str) -> bool:
    desc = await client.get_workflow_handle(scheduled_workflow_id(schedule_id, nominal)).describe()
    return desc.status == status


def test_the_cli_creates_describes_triggers_and_deletes_a_schedule(kafka_config, processors):
    processors.start()
    env = {"KADENCE_KAFKA_BOOTSTRAP": kafka_config.bootstrap, "KADENCE_NAMESPACE": kafka_config.namespace}

    def cli(*args: str) -> subprocess.CompletedProcess:
        import os

        return subprocess.run(
            [sys.executable, "-m", "kadence.cli", "schedules", *args],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )

    worker = subprocess.Popen(
        [sys.executable, "-m", "kadence.cli", "schedules", "worker"],
        env={**__import__("os").environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        made = cli(
            "create", "nightly", "--workflow", "Tick", "--task-queue", "ticks", "--input", "0",
            "--cron", "0 3 * * *", "--time-zone", "Europe/Paris", "--overlap", "buffer_one",
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        again = cli("create", "nightly", "--workflow", "Tick", "--task-queue", "ticks", "--every", "1h")
        assert again.returncode == 1 and "exists" in again.stderr
        bad = cli("create", "bad", "--workflow", "Tick", "--task-queue", "ticks", "--cron", "every day")
        assert bad.returncode == 1 and "not five fields" in bad.stderr
        described = cli("describe", "nightly")
        assert described.returncode == 0, described.stderr
        desc = json.loads(described.stdout)
        assert desc["state"]["request"]["spec"]["cron"] == ["0 3 * * *"]
        assert desc["state"]["request"]["policy"]["overlap"] == "buffer_one"
        assert len(desc["next_times_ms"]) == 5
        triggered = cli("trigger", "nightly")
        assert triggered.returncode == 0, triggered.stderr
        assert cli("delete", "nightly").returncode == 0
        gone = cli("describe", "nightly")
        assert gone.returncode == 1 and "deleted" in gone.stderr
    finally:
        worker.terminate()
        worker.wait(30)


async def test_the_gateway_creates_changes_lists_and_deletes_a_schedule(http, gw_config, gw_projection):
    from kadence import Client

    tag = uuid.uuid4().hex[:8]
    sid = f"http-{tag}"
    body = {
        "spec": {"cron": ["0 6 * * MON-FRI"], "time_zone": "Europe/Paris"},
        "action": {"workflow_type": "Tick", "task_queue": f"ticks-{tag}", "args": [0.0]},
        "policy": {"overlap": "allow_all"},
    }
    bad = await http.post(f"/v1/schedules/{sid}", json={**body, "spec": {"cron": ["0 25 * * *"]}})
    assert bad.status_code == 400 and "not five fields" in bad.json()["error"]["message"], bad.text
    bad = await http.post(f"/v1/schedules/{sid}", json={**body, "policy": {"overlap": "sometimes"}})
    assert bad.status_code == 400 and "overlap must be one of" in bad.json()["error"]["message"], bad.text
    made = await http.post(f"/v1/schedules/{sid}", json=body, headers={"Idempotency-Key": f"mk-{tag}"})
    assert made.status_code == 201, made.text
    again = await http.post(f"/v1/schedules/{sid}", json=body, headers={"Idempotency-Key": f"mk-{tag}"})
    assert again.json() == made.json()  # the same start, answered again
    other = await http.post(f"/v1/schedules/{sid}", json=body)
    assert other.status_code == 409 and other.json()["error"]["code"] == "already_exists"
    client = await Client.connect(config=gw_config)
    try:
        async with (
            Worker(
                client, task_queue=SCHEDULES_TASK_QUEUE, workflows=[Schedule], activities=schedule_activities(client)
            ),
            Worker(client, task_queue=f"ticks-{tag}", workflows=[Tick]),
        ):
            desc = await http.get(f"/v1/schedules/{sid}")
            assert desc.status_code == 200, desc.text
            assert desc.json()["state"]["request"]["spec"]["time_zone"] == "Europe/Paris"
            assert len(desc.json()["next_times_ms"]) == 5
            r = await http.post(f"/v1/schedules/{sid}/pause", json={"note": "holiday"})
            assert r.status_code == 200, r.text
            r = await http.post(f"/v1/schedules/{sid}/trigger", json={"overlap": "nope"})
            assert r.status_code == 400, r.text  # refused by the gateway's model: nothing sent
            r = await http.post(f"/v1/schedules/{sid}/trigger", headers={"Idempotency-Key": f"tr-{tag}"})
            assert r.status_code == 200, r.text
            nominal = r.json()["result"]
            r2 = await http.post(f"/v1/schedules/{sid}/trigger", headers={"Idempotency-Key": f"tr-{tag}"})
            assert r2.json()["result"] == nominal  # one update, answered twice
            r = await http.post(f"/v1/schedules/{sid}/backfill", json={"start_ms": 10, "end_ms": 5})
            assert r.status_code == 400 and "ends before it starts" in r.json()["error"]["message"]
            day = 86_400_000
            start = (int(time.time() * 1000) // day - 14) * day
            r = await http.post(
                f"/v1/schedules/{sid}/backfill", json={"start_ms": start, "end_ms": start + 7 * day - 1}
            )
            assert r.status_code == 200 and r.json()["result"] == 5, r.text  # five weekdays
            await wait_until(
                lambda: _json(
                    http, f"/v1/schedules/{sid}", lambda d: d["state"]["actions"] == 6 and not d["state"]["running"]
                ),
                60,
                "six runs ended",
            )
            r = await http.put(f"/v1/schedules/{sid}", json={**body, "paused": False, "note": "back"})
            assert r.status_code == 200, r.text
            desc = (await http.get(f"/v1/schedules/{sid}")).json()
            assert (desc["state"]["paused"], desc["state"]["note"]) == (False, "back")
            ids = [r["workflow_id"] for r in desc["state"]["recent"]]
            assert len(set(ids)) == 6 and scheduled_workflow_id(sid, nominal) in ids

            async def listed():
                r = await http.get("/v1/schedules")
                return sid in [s["schedule_id"] for s in r.json()["schedules"]]

            await wait_until(listed, 30, "the schedule in the list")
            assert (await http.delete(f"/v1/schedules/{sid}")).status_code == 200
            gone = await http.get(f"/v1/schedules/{sid}")
            assert gone.status_code == 404 and "deleted" in gone.json()["error"]["message"]
            assert (await http.post(f"/v1/schedules/{sid}/pause")).status_code == 404
            assert (await http.get("/v1/schedules/never-made")).status_code == 404
    finally:
        await client.close()


async def _json(http, path: str, check) -> bool:
    r = await http.get(path)
    return r.status_code == 200 and check(r.json())


async def test_a_calendar_to_the_second_with_limited_actions_starts_that_many_runs(client, processors):
    from kadence import ScheduleCalendar

    processors.start()
    processors.start_timers()
    a, b = _workers(client)
    every_two = ScheduleSpec(calendars=[ScheduleCalendar(second="*/2", minute="*", hour="*")])
    async with a, b:
        handle = await client.create_schedule(
            "limited",
            spec=every_two,
            action=schedule_action(Tick, 0.0, task_queue="ticks"),
            policy=SchedulePolicy(overlap="allow_all"),
            remaining_actions=3,
        )
        await wait_until(lambda: _actions(handle, 3), 30, "three runs")
        await asyncio.sleep(5)  # two or three more times of the calendar pass
        desc = await handle.describe()
        started = await _initiated(client, "limited")
        await handle.delete()
    assert desc.state.actions == 3 and desc.state.request.remaining_actions == 0 and desc.next_times_ms == []
    assert len(started) == 3 and len({wf for wf, _ in started}) == 3
    # each run's time is an even second, as the calendar says
    seconds = [int(wf.rsplit(":", 1)[1].rstrip("Z")) for wf, _ in started]
    assert all(s % 2 == 0 for s in seconds), started


async def _actions(handle, n: int) -> bool:
    return (await handle.describe()).state.actions >= n
