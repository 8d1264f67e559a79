"""describe: one shape for the SDK, the CLI and the gateway, built from the run's state by the
engine (``processors.effects.description``, ``topics.describe``), here on ``kadence.testing``:
type, queue, times, a pending activity waiting to retry with its last failure and next attempt,
a pending timer, a pending child, signals received, open updates, search attributes, memo,
history length; a closed run adds its result or failure."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from kadence import ApplicationError, RetryPolicy, activity, workflow
from kadence.processors.effects import BatchView, Outbox, count_history_bytes
from kadence.processors.state_machine import transition
from kadence.processors.store import MemoryShardStore
from kadence.testing import WorkflowEnvironment
from kadence.topics import serde
from kadence.topics.payload import JsonConverter
from kadence.topics.records import command, now_ms


@activity.defn
async def flaky(n: int) -> int:
    raise ApplicationError(f"card declined (try {activity.info().attempt})", type="Declined")


@workflow.defn
class Sleeper:
    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(timedelta(days=1))
        return "woke"


@workflow.defn
class Busy:
    def __init__(self) -> None:
        self.go = False

    @workflow.signal
    def poke(self) -> None:
        pass

    @workflow.run
    async def run(self) -> str:
        workflow.upsert_search_attributes({"customer": "ann"})
        await workflow.start_child_workflow(Sleeper, id="busy-1/child")
        policy = RetryPolicy(initial_interval=timedelta(hours=1), maximum_attempts=5)
        act = asyncio.ensure_future(
            workflow.execute_activity(flaky, 1, start_to_close_timeout=timedelta(seconds=5), retry_policy=policy)
        )
        await workflow.sleep(timedelta(days=2))
        return str(await act)


async def _until(handle, predicate, what: str) -> dict:
    async def poll():
        while True:
            d = await handle.describe()
            if predicate(d):
                return d
            await asyncio.sleep(0.01)

    return await asyncio.wait_for(poll(), 10)


async def test_describe_shows_what_the_run_waits_for():
    async with WorkflowEnvironment(workflows=[Busy, Sleeper], activities=[flaky]) as env:
        handle = await env.client.start_workflow(Busy, id="busy-1", task_queue="q", memo={"team": "payments"})
        await handle.signal("poke")
        d = await _until(
            handle,
            lambda d: d["pending_activities"] and d["pending_activities"][0]["last_failure"],
            "the first attempt to fail",
        )
        child = await env.client.get_workflow_handle("busy-1/child").describe()
        # the bytes of the run's history records as written, at the time of the describe
        _run, events = env.engine.history_of("busy-1", handle.run_id)
        written = sum(len(serde.encode("HistoryEvent", e)) for e in events[: d["history_length"]])
    assert d["history_size_bytes"] == written and written > 0
    assert child["parent"] == {"workflow_id": "busy-1", "run_id": handle.run_id}
    assert d["status"] == "running" and d["workflow_type"] == "Busy" and d["task_queue"] == "q"
    assert datetime.fromisoformat(d["start_time"]) and d["close_time"] is None
    (act,) = d["pending_activities"]
    assert act["activity_type"] == "flaky" and act["attempt"] == 2 and act["state"] == "retry_wait"
    assert act["last_failure"] == {"type": "Declined", "message": "card declined (try 1)", "non_retryable": False}
    assert datetime.fromisoformat(act["next_attempt_time"]) - datetime.fromisoformat(
        act["attempt_started_time"]
    ) >= timedelta(minutes=59)
    kinds = sorted(t["kind"] for t in d["pending_timers"])
    assert kinds == ["user"], d["pending_timers"]  # the sleep; the retry's timer is the activity's next_attempt
    assert d["children"] == [{"workflow_id": "busy-1/child", "run_id": d["children"][0]["run_id"]}]
    assert d["children"][0]["run_id"]
    assert d["signals_received"] == 1 and d["open_updates"] == 0
    assert d["search_attributes"] == {"customer": "ann"} and d["memo"] == {"team": "payments"}
    assert d["history_length"] >= 8 and d["last_task_failure"] is None and d["parent"] is None


async def test_a_closed_run_shows_its_result():
    async with WorkflowEnvironment(workflows=[Sleeper]) as env:
        handle = await env.client.start_workflow(Sleeper, id="sleepy", task_queue="q")
        assert await handle.result() == "woke"
        d = await handle.describe()
    assert d["status"] == "completed" and d["result"] == "woke" and d["close_time"] is not None
    assert d["pending_timers"] == [] and d["pending_activities"] == []


def test_a_describe_in_the_batch_of_earlier_events_counts_their_bytes():
    """A describe that follows other commands of the same workflow in one batch sees their
    events in ``history_length``; their bytes are counted only when the batch is encoded for the
    topic, after it. The description adds them (CI of 3f8b45e: 2,883 bytes described against
    4,001 written up to the described length, with activity failures and heartbeats in the
    describe's batch)."""
    store = MemoryShardStore(0)
    written: list[dict] = []

    def batch(*cmds: dict) -> Outbox:
        view, out = BatchView(store), Outbox()
        for cmd in cmds:
            transition(serde.decode("Command", serde.encode("Command", cmd)), view, out, now_ms())
        for wf, ev in out.events:  # as the processor encodes them, after the batch
            raw = serde.encode("HistoryEvent", ev)
            count_history_bytes(view.states.get(wf), ev, len(raw))
            written.append(serde.decode("HistoryEvent", raw))
        view.commit_into(store)
        return out

    conv = JsonConverter()
    batch(
        command(
            "d-1",
            "StartWorkflow",
            {"workflow_type": "Busy", "task_queue": "q", "input": conv.to_bytes([])},
            request_id="start",
        )
    )
    before = len(written)
    out = batch(
        *(
            command(
                "d-1",
                "SignalWorkflow",
                {"signal_name": "poke", "input": conv.to_bytes([n]), "identity": "t", "start": None},
                request_id=f"s{n}",
            )
            for n in range(3)
        ),
        command("d-1", "AwaitWorkflowResult", {"wait": False}, request_id="describe"),
    )
    (answer,) = [r for r in out.replies if r["request_id"] == "describe"]
    d = answer["description"]
    assert d["history_length"] > before  # the signals' events are described
    assert d["history_size_bytes"] == sum(
        len(serde.encode("HistoryEvent", e)) for e in written if e["seq"] <= d["history_length"]
    )
