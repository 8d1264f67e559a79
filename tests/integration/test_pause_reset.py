"""Pause/unpause and reset of closed runs on the real broker (#17): a paused run's timer is held
and fires at unpause, its signals are recorded meanwhile, an activity scheduled while paused is
held and runs at unpause; through the SDK, the CLI and the gateway, with the visibility list
showing the paused runs; a closed run is reset, and a dry run answers what the reset then does."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from kadence import Client, ResetRejectedError, Worker, workflow
from tests.support.cli import kadence

from .conftest import wait_until
from .gateway_support import auth, checked_client
from .workflows import ThreeSteps, add, double, three_steps_result


@workflow.defn
class PauseProbe:
    def __init__(self) -> None:
        self.got: list[str] = []

    @workflow.signal
    def note(self, text: str) -> None:
        self.got.append(text)

    @workflow.run
    async def run(self) -> list:
        await workflow.sleep(3)
        total = await workflow.execute_activity(add, 1, 2, start_to_close_timeout=timedelta(seconds=30))
        return [total, self.got]


def _types(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


async def test_a_paused_run_holds_its_timer_and_activity_and_goes_on_at_unpause(client, processors, kafka_config):
    processors.start()
    processors.start_timers()
    async with Worker(client, task_queue="pause-q", workflows=[PauseProbe], activities=[add]):
        handle = await client.start_workflow(PauseProbe, id="pause-1", task_queue="pause-q")

        async def timer_started():
            return (await handle.describe())["pending_timers"]

        await wait_until(timer_started, 60, "the workflow's timer")
        # paused through the SDK, one round trip: the CLI's start-up (over a second on a loaded
        # machine) could outlast the timer, which then fires before the pause (seen in a run
        # beside a CI run); the CLI unpauses below, where nothing races it
        await handle.pause(reason="investigating")

        async def held():  # the timer fell due and the engine kept it for the unpause
            d = await handle.describe()
            return d["held_timers"] == 1 and d

        d = await wait_until(held, 60, "the timer to fall due while paused")
        assert d["paused"] and d["status"] == "running"
        await handle.signal("note", "while paused")

        async def signaled():
            return "WorkflowSignaled" in _types(await handle.history())

        await wait_until(signaled, 30, "the signal to be recorded while paused")
        types = _types(await handle.history())
        assert "TimerFired" not in types and types.count("WorkflowTaskScheduled") == 1  # nothing went out
        rc, _out, err = await kadence(kafka_config, "unpause", "pause-1", "--reason", "fixed")
        assert rc == 0, err
        assert await handle.result(timeout=60) == [3, ["while paused"]]
    types = _types(await handle.history())
    order = [
        "WorkflowExecutionPaused",
        "WorkflowSignaled",
        "WorkflowExecutionUnpaused",
        "TimerFired",
        "ActivityTaskCompleted",
        "WorkflowExecutionCompleted",
    ]
    assert [t for t in types if t in order] == order
    assert not (await handle.describe())["paused"]

    # an activity scheduled while paused is held (no task is sent), and runs at unpause
    handle = await client.start_workflow(ThreeSteps, 4, id="pause-2", task_queue="pause-q2")
    await handle.pause()
    await handle.pause()  # pausing a paused run: ok, nothing recorded
    async with Worker(client, task_queue="pause-q2", workflows=[ThreeSteps], activities=[add, double]):

        async def activity_held():  # the workflow task sent before the pause completed; its activity waits
            d = await handle.describe()
            acts = d["pending_activities"]
            return acts and acts[0]["state"] == "held" and d

        await wait_until(activity_held, 60, "the first activity to be held")
        assert "ActivityTaskCompleted" not in _types(await handle.history())
        await handle.unpause()
        assert await handle.result(timeout=60) == three_steps_result(4)
    assert _types(await handle.history()).count("WorkflowExecutionPaused") == 1
    with pytest.raises(Exception, match="workflow is completed"):
        await handle.pause()


async def test_the_gateway_pauses_lists_paused_runs_and_resets_a_closed_run(
    gateway_url, api_key, gw_config, gw_projection
):
    tag = uuid.uuid4().hex[:8]
    wf = f"gw-pause-{tag}"
    async with checked_client(gateway_url, headers=auth(api_key)) as http:
        r = await http.post(
            "/v1/workflows/ThreeSteps/start",
            json={"workflow_id": wf, "task_queue": f"gq-{tag}", "input": [5], "search_attributes": {"tag": tag}},
        )
        assert r.status_code == 201, r.text
        paused = await http.post(
            f"/v1/workflows/{wf}/pause", json={"reason": "ops"}, headers={"Idempotency-Key": f"p-{tag}"}
        )
        assert paused.status_code == 200, paused.text
        token = paused.headers["Kadence-Consistency-Token"]
        listed = await http.get(
            "/v1/workflows", params={"paused": "true", "search": f"tag:{tag}", "consistency_token": token}
        )
        assert [(w["workflow_id"], w["paused"]) for w in listed.json()["workflows"]] == [(wf, True)], listed.text
        assert (await http.get(f"/v1/workflows/{wf}")).json()["paused"] is True
        again = await http.post(
            f"/v1/workflows/{wf}/pause", json={"reason": "ops"}, headers={"Idempotency-Key": f"p-{tag}"}
        )
        assert again.status_code == 200 and again.json() == paused.json()
        un = await http.post(f"/v1/workflows/{wf}/unpause", headers={"Idempotency-Key": f"u-{tag}"})
        assert un.status_code == 200, un.text
        listed = await http.get(
            "/v1/workflows",
            params={
                "paused": "true",
                "search": f"tag:{tag}",
                "consistency_token": un.headers["Kadence-Consistency-Token"],
            },
        )
        assert listed.json()["workflows"] == []

        client = await Client.connect(config=gw_config)
        try:
            async with Worker(client, task_queue=f"gq-{tag}", workflows=[ThreeSteps], activities=[add, double]):
                handle = client.get_workflow_handle(wf)
                assert await handle.result(timeout=60) == three_steps_result(5)
                closed_run = handle.run_id or (await handle.describe())["run_id"]
                events = (await http.get(f"/v1/workflows/{wf}/history")).json()["events"]
                point = next(e["seq"] for e in events if e["type"] == "WorkflowTaskCompleted")
                # the dry run and the reset of the closed run give the same plan; a bad point the same 409
                dry = await http.post(f"/v1/workflows/{wf}/reset", json={"to_event": point, "dry_run": True})
                assert dry.status_code == 200, dry.text
                assert dry.json()["run_id"] is None and dry.json()["plan"] == {
                    "terminates_run_id": None,
                    "from_status": "completed",
                    "branch_event": point,
                    "kept_events": point - 1,
                    "activities_rerun": [],
                    "timers_kept": 0,
                }
                bad_dry = await http.post(f"/v1/workflows/{wf}/reset", json={"to_event": 2, "dry_run": True})
                bad = await http.post(f"/v1/workflows/{wf}/reset", json={"to_event": 2})
                assert bad_dry.status_code == bad.status_code == 409
                assert bad_dry.json()["error"]["code"] == bad.json()["error"]["code"] == "reset_rejected"
                assert bad_dry.json()["error"]["message"] == bad.json()["error"]["message"]
                real = await http.post(
                    f"/v1/workflows/{wf}/reset",
                    json={"to_event": point, "reason": "rerun"},
                    headers={"Idempotency-Key": f"r-{tag}"},
                )
                assert real.status_code == 200, real.text
                assert real.json()["plan"] == dry.json()["plan"] and real.json()["run_id"] not in (None, closed_run)
                assert await client.get_workflow_handle(wf, run_id=real.json()["run_id"]).result(
                    timeout=60
                ) == three_steps_result(5)
            old = await client.get_workflow_handle(wf, run_id=closed_run).history()
            assert old[-1]["type"] == "WorkflowExecutionCompleted"  # the closed run stays as it ended
            with pytest.raises(ResetRejectedError, match="not the current run"):
                await client.get_workflow_handle(wf, run_id=closed_run).reset(to_event=point)
        finally:
            await client.close()


async def test_the_gateway_starts_a_batch_and_reports_its_progress(gateway_url, api_key, gw_config, gw_projection):
    from kadence.operations import BATCH_TASK_QUEUE, Batch, batch_activities

    from .projection_support import redis_url

    tag = uuid.uuid4().hex[:8]
    async with checked_client(gateway_url, headers=auth(api_key)) as http:
        for bad, why in (
            ({"operation": "explode", "filter": {"search": {"tag": tag}}}, "operation must be one of"),
            ({"operation": "pause"}, "at least one filter"),
        ):
            r = await http.post("/v1/batches", json=bad)
            assert r.status_code == 400 and why in r.json()["error"]["message"], r.text
        token = None
        for i in range(3):
            r = await http.post(
                "/v1/workflows/ThreeSteps/start",
                json={
                    "workflow_id": f"b-{i}-{tag}",
                    "task_queue": f"bq-{tag}",
                    "input": [i],
                    "search_attributes": {"tag": tag},
                },
            )
            assert r.status_code == 201, r.text
            token = r.headers["Kadence-Consistency-Token"]
        listed = await http.get("/v1/workflows", params={"search": f"tag:{tag}", "consistency_token": token})
        assert len(listed.json()["workflows"]) == 3
        started = await http.post(
            "/v1/batches",
            json={"operation": "pause", "filter": {"search": {"tag": tag}}, "reason": "maintenance"},
            headers={"Idempotency-Key": f"batch-{tag}"},
        )
        assert started.status_code == 201, started.text
        batch_id = started.json()["batch_id"]
        again = await http.post(
            "/v1/batches",
            json={"operation": "pause", "filter": {"search": {"tag": tag}}, "reason": "maintenance"},
            headers={"Idempotency-Key": f"batch-{tag}"},
        )
        assert again.json() == started.json()  # the same batch, started once
        client = await Client.connect(config=gw_config)
        try:
            async with Worker(
                client, task_queue=BATCH_TASK_QUEUE, workflows=[Batch], activities=batch_activities(client, redis_url())
            ):

                async def finished():
                    r = await http.get(f"/v1/batches/{batch_id}")
                    return r.status_code == 200 and r.json()["finished"] and r.json()

                p = await wait_until(finished, 60, "the batch to finish")
        finally:
            await client.close()
        assert (p["operation"], p["total"], p["done"], p["succeeded"], p["failed"]) == ("pause", 3, 3, 3, 0)
        for i in range(3):
            assert (await http.get(f"/v1/workflows/b-{i}-{tag}")).json()["paused"] is True
