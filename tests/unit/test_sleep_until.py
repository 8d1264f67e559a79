"""``workflow.sleep_until`` (an absolute timer): the engine fires it at the instant the code named,
however late the workflow task that asked for it is recorded; ``sleep`` counts its duration from
when the engine records the task (schema 22, ``StartTimer.fire_at_ms``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kadence import InvalidArgumentError, Replayer, workflow
from kadence.testing import WorkflowEnvironment

from .engine_harness import Harness

INSTANT = datetime(2031, 1, 1, 9, 0, tzinfo=UTC)


@workflow.defn
class Alarm:
    @workflow.run
    async def run(self, iso: str) -> str:
        await workflow.sleep_until(datetime.fromisoformat(iso))
        return workflow.now().isoformat()


@workflow.defn
class NaiveAlarm:
    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.sleep_until(datetime(2031, 1, 1))
        except InvalidArgumentError as exc:
            return str(exc)
        return "slept"


async def test_it_fires_at_the_instant_and_the_history_says_so():
    async with WorkflowEnvironment(workflows=[Alarm, NaiveAlarm]) as e:
        when = e.now().replace(microsecond=0) + timedelta(hours=1)
        handle = await e.client.start_workflow(Alarm, when.isoformat(), id="alarm", task_queue="q")
        await e.sleep(3590)
        assert (await handle.describe()).status.value == "running"
        woke = datetime.fromisoformat(await handle.result())
        assert woke >= when and (woke - when) < timedelta(seconds=1)
        started = [ev for ev in await handle.history() if ev["type"] == "TimerStarted"]
        assert [ev["attributes"]["fire_at_ms"] for ev in started] == [int(when.timestamp() * 1000)]
        assert Replayer(workflows=[Alarm]).replay(await handle.history(raw=True)) is not None
        naive = await e.client.execute_workflow(NaiveAlarm, id="naive", task_queue="q")
        assert "timezone-aware" in naive


def _task_with(h: Harness, command: dict) -> dict:
    h.start("wf", "Alarm", [])
    (task,) = h.take_tasks("workflow")
    h.send(
        "wf",
        "RespondWorkflowTaskCompleted",
        {"scheduled_seq": task["scheduled_seq"], "commands": [("StartTimer", command)]},
        run_id=task["run_id"],
    )
    return next(e for e in h.events if e["attributes"][0] == "TimerStarted")["attributes"][1]


def test_the_engine_takes_an_absolute_time_as_it_is_and_a_duration_from_when_it_records_it():
    at = int(INSTANT.timestamp() * 1000)
    assert _task_with(Harness(), {"timer_id": "1", "duration_ms": 5, "fire_at_ms": at})["fire_at_ms"] == at
    h = Harness()
    relative = _task_with(h, {"timer_id": "1", "duration_ms": 60_000})
    assert relative["fire_at_ms"] == h.last_ts + 60_000


def test_a_process_pinned_to_schema_21_writes_the_timer_as_its_duration(monkeypatch):
    from kadence.topics import serde
    from kadence.topics.records import command
    from tests.support.codecs import pin_write_version

    timer = {"timer_id": "1", "duration_ms": 5_000, "fire_at_ms": int(INSTANT.timestamp() * 1000)}
    body = {"scheduled_seq": 3, "commands": [("StartTimer", timer)]}
    pin_write_version(monkeypatch, 21)
    try:
        wire = serde.encode("Command", command("wf", "RespondWorkflowTaskCompleted", body))
    finally:
        pin_write_version(monkeypatch, None)
    (decoded,) = serde.decode("Command", wire)["body"][1]["commands"]
    assert decoded == ("StartTimer", {"timer_id": "1", "duration_ms": 5_000, "fire_at_ms": None})
