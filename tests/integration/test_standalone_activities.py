"""Standalone activities on the real broker (issue 47 item 3, decision 0063): an activity a client
starts by its own ID, with no workflow. A retried activity gives one stable result to two
callers; a second start with the same ID follows the conflict and reuse policies; heartbeats,
cancel, terminate, describe and async completion work as a workflow's activity's do."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import timedelta

import httpx
import pytest

from kadence import (
    ActivityAlreadyStartedError,
    ActivityExecutionError,
    ActivityFailedError,
    ActivityNotFoundError,
    CommandRejectedError,
    RetryPolicy,
    Worker,
    activity,
    workflow,
)
from kadence.gateway import GatewayConfig, create_app
from tests.support.cli import kadence

from .conftest import wait_until
from .gateway_support import serve

T = timedelta(seconds=30)
FAST = RetryPolicy(initial_interval=timedelta(milliseconds=100))
QUEUE = "standalone"

runs: list[tuple[str, int, bool]] = []
cancelled: list[str] = []
watching: list[str] = []
tokens: dict[str, bytes] = {}


@activity.defn
async def charge(order: str, amount: int) -> dict:
    info = activity.info()
    runs.append((order, info.attempt, info.standalone))
    if info.attempt < 3:
        raise RuntimeError(f"gateway busy (attempt {info.attempt})")
    return {"order": order, "charged": amount, "attempt": info.attempt}


@activity.defn
async def watch(name: str) -> str:
    watching.append(name)
    try:
        while True:
            activity.heartbeat("watching")
            await asyncio.sleep(0.2)
    except asyncio.CancelledError:
        cancelled.append(name)
        raise


@activity.defn
async def approve(name: str) -> str:
    tokens[name] = activity.info().task_token
    activity.raise_complete_async()


@activity.defn
async def narrate(n: int) -> int:
    attempt = activity.info().attempt
    for i in range(n):
        activity.publish("progress", f"attempt {attempt} step {i}")
    if attempt == 1:
        raise RuntimeError("the first attempt fails after publishing")
    return n


@workflow.defn
class Noop:
    @workflow.run
    async def run(self) -> None:
        return None


def _worker(client):
    return Worker(client, task_queue=QUEUE, activities=[charge, watch, approve, narrate])


async def test_a_retried_activity_gives_one_stable_result_to_two_callers(client, processors):
    processors.start()
    processors.start_timers()
    async with _worker(client):
        handle = await client.start_activity(
            charge, "o-1", 42, id="charge-o-1", task_queue=QUEUE, start_to_close_timeout=T, retry_policy=FAST
        )
        other = client.get_activity_handle("charge-o-1")
        first, second = await asyncio.gather(handle.result(timeout=60), other.result(timeout=60))
        assert first == second == {"order": "o-1", "charged": 42, "attempt": 3}
        assert [r for r in runs if r[0] == "o-1"] == [("o-1", 1, True), ("o-1", 2, True), ("o-1", 3, True)]
        # once more, later, from the history: the same result, and one completion recorded
        assert await client.get_activity_handle("charge-o-1").result(timeout=30) == first
        kinds = [e["type"] for e in await handle.history()]
        assert kinds.count("ActivityTaskCompleted") == 1 and kinds.count("ActivityTaskAttemptFailed") == 2
        assert "WorkflowTaskScheduled" not in kinds and kinds[-1] == "WorkflowExecutionCompleted"
        described = await handle.describe()
        assert described.status.value == "completed"
        # execute_activity: start and result in one call
        assert (
            await client.execute_activity(
                charge, "o-2", 7, id="charge-o-2", task_queue=QUEUE, start_to_close_timeout=T, retry_policy=FAST
            )
        )["charged"] == 7


async def test_a_second_start_follows_the_conflict_and_reuse_policies(client, processors):
    processors.start()
    processors.start_timers()
    opts = {"task_queue": QUEUE, "start_to_close_timeout": T, "heartbeat_timeout": timedelta(seconds=5)}
    async with _worker(client):
        first = await client.start_activity(watch, "w-1", id="watch-1", **opts)
        with pytest.raises(ActivityAlreadyStartedError) as refused:
            await client.start_activity(watch, "w-1", id="watch-1", **opts)
        assert refused.value.run_id == first.run_id
        same = await client.start_activity(watch, "w-1", id="watch-1", id_conflict_policy="use_existing", **opts)
        assert same.run_id == first.run_id
        described = await first.describe()
        assert described.status.value == "running" and described.pending_activities[0].attempt == 1
        replaced = await client.start_activity(
            watch, "w-1", id="watch-1", id_conflict_policy="terminate_existing", **opts
        )
        assert replaced.run_id != first.run_id
        with pytest.raises(ActivityFailedError) as ended:
            await first.result(timeout=30)
        assert ended.value.status == "terminated"
        await replaced.terminate(reason="done")
        with pytest.raises(ActivityAlreadyStartedError):
            await client.start_activity(watch, "w-1", id="watch-1", id_reuse_policy="reject_duplicate", **opts)
        # a terminated run counts as failed (as in Temporal): allow_duplicate_failed_only starts anew
        again = await client.start_activity(
            watch, "w-1", id="watch-1", id_reuse_policy="allow_duplicate_failed_only", **opts
        )
        assert again.run_id not in (first.run_id, replaced.run_id)
        await again.terminate()


async def test_cancel_reaches_the_attempt_at_its_heartbeat_and_closes_the_run_canceled(client, processors):
    processors.start()
    processors.start_timers()
    async with _worker(client):
        handle = await client.start_activity(
            watch,
            "w-2",
            id="watch-2",
            task_queue=QUEUE,
            start_to_close_timeout=T,
            heartbeat_timeout=timedelta(seconds=5),
        )
        await wait_until(lambda: "w-2" in watching, 30, "the attempt to run")  # a running attempt is canceled
        await handle.cancel(reason="no longer needed")
        with pytest.raises(ActivityFailedError) as ended:
            await handle.result(timeout=30)
        assert ended.value.status == "canceled"
        await wait_until(lambda: "w-2" in cancelled, 10, "the attempt to learn of the cancel at its heartbeat")
        with pytest.raises(
            ActivityExecutionError, match="cancel of standalone activity 'watch-2' rejected: activity is canceled"
        ):
            await handle.cancel()


async def test_async_completion_and_the_typed_errors(client, processors):
    processors.start()
    processors.start_timers()
    async with _worker(client):
        handle = await client.start_activity(approve, "a-1", id="approve-1", task_queue=QUEUE, start_to_close_timeout=T)
        await wait_until(lambda: "a-1" in tokens, 10, "the activity to hand out its token")
        await client.get_async_activity_handle(tokens["a-1"]).complete("approved by Ann")
        assert await handle.result(timeout=30) == "approved by Ann"
    with pytest.raises(ActivityNotFoundError):
        await client.get_activity_handle("never-started").result(timeout=10)
    # the prefix belongs to activities: a workflow start may not take it
    with pytest.raises(CommandRejectedError, match="standalone activities"):
        await client.start_workflow(Noop, id="kadence-activity:approve-1", task_queue=QUEUE)


async def test_over_http_start_wait_describe_cancel_and_the_errors(client, processors, kafka_config):
    processors.start()
    processors.start_timers()
    app = create_app(GatewayConfig(kafka=kafka_config, auth=False, reply_timeout=30.0))
    retry = {"initial_interval_seconds": 0.1}
    async with _worker(client):
        with serve(app) as url:
            async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                started = await http.post(
                    "/v1/activities/charge/start",
                    json={"activity_id": "http-1", "task_queue": QUEUE, "input": ["o-h", 5],
                          "start_to_close_timeout_seconds": 30, "retry_policy": retry, "wait_seconds": 30},
                )  # fmt: skip
                assert started.status_code == 201, started.text
                body = started.json()
                assert body["activity_id"] == "http-1" and body["status"] == "completed"
                assert body["result"] == {"order": "o-h", "charged": 5, "attempt": 3}
                result = await http.get("/v1/activities/http-1/result")
                assert result.json()["result"] == body["result"] and result.json()["run_id"] == body["run_id"]
                described = await http.get("/v1/activities/http-1")
                assert described.status_code == 200 and described.json()["status"] == "completed"
                # a second start of the open ID: 409, or the open run with use_existing
                watch_start = {"activity_id": "http-2", "task_queue": QUEUE, "input": ["w-h"],
                               "start_to_close_timeout_seconds": 30, "heartbeat_timeout_seconds": 5}  # fmt: skip
                first = await http.post("/v1/activities/watch/start", json=watch_start)
                assert first.status_code == 201, first.text
                again = await http.post("/v1/activities/watch/start", json=watch_start)
                assert again.status_code == 409 and again.json()["error"]["code"] == "already_started"
                same = await http.post(
                    "/v1/activities/watch/start", json={**watch_start, "id_conflict_policy": "use_existing"}
                )
                assert same.status_code == 200 and same.json()["run_id"] == first.json()["run_id"]
                running = await http.get("/v1/activities/http-2")
                assert running.json()["status"] == "running" and running.json()["pending_activities"]
                canceled = await http.post("/v1/activities/http-2/cancel", json={"reason": "test"})
                assert canceled.status_code == 200, canceled.text
                outcome = (await http.get("/v1/activities/http-2/result", params={"wait_seconds": 10})).json()
                assert outcome["status"] == "canceled"
                twice = await http.post("/v1/activities/http-2/terminate")
                assert twice.status_code == 409
                # an ID with a slash travels encoded, as a workflow ID does
                slashed = {**watch_start, "activity_id": "acme/http-3"}
                assert (await http.post("/v1/activities/watch/start", json=slashed)).status_code == 201
                assert (await http.get("/v1/activities/acme%2Fhttp-3")).json()["activity_id"] == "acme/http-3"
                assert (await http.post("/v1/activities/acme%2Fhttp-3/terminate")).status_code == 200
                missing = await http.get("/v1/activities/nothing-here")
                assert missing.status_code == 404 and "nothing-here" in missing.json()["error"]["message"]
                no_timeout = await http.post("/v1/activities/watch/start", json={"task_queue": QUEUE})
                assert no_timeout.status_code == 400 and "timeout" in no_timeout.json()["error"]["message"]


async def _cli_over_http(url: str, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, "KADENCE_GATEWAY_URL": url, "KADENCE_KAFKA_BOOTSTRAP": "127.0.0.1:9"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kadence.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    return proc.returncode, out.decode(), err.decode()


async def test_the_cli_over_kafka_and_over_the_gateway(client, processors, kafka_config):
    processors.start()
    processors.start_timers()
    app = create_app(GatewayConfig(kafka=kafka_config, auth=False, reply_timeout=30.0))
    async with _worker(client):
        status, out, err = await kadence(
            kafka_config, "activity", "start", "charge", "--id", "cli-1", "--task-queue", QUEUE,
            "--input", '["o-c", 3]', "--start-to-close", "30", "--wait",
        )  # fmt: skip
        assert status == 0, err
        started = json.loads(out)
        assert started["activity_id"] == "cli-1" and started["result"]["charged"] == 3
        status, out, err = await kadence(kafka_config, "activity", "describe", "cli-1")
        assert status == 0, err
        assert json.loads(out)["status"] == "completed" and json.loads(out)["run_id"] == started["run_id"]
        status, out, err = await kadence(
            kafka_config, "activity", "start", "charge", "--id", "cli-1", "--task-queue", QUEUE,
            "--start-to-close", "30", "--id-reuse-policy", "reject_duplicate",
        )  # fmt: skip
        assert status == 1 and "reject_duplicate" in err
        with serve(app) as url:
            status, out, err = await _cli_over_http(
                url, "activity", "start", "watch", "--id", "cli-2", "--task-queue", QUEUE, "--input", '["w-c"]',
                "--start-to-close", "30", "--heartbeat-timeout", "5",
            )  # fmt: skip
            assert status == 0, err
            assert json.loads(out)["activity_id"] == "cli-2"
            status, out, err = await _cli_over_http(url, "activity", "cancel", "cli-2", "--reason", "cli")
            assert status == 0, err
            status, out, err = await _cli_over_http(url, "activity", "result", "cli-2")
            assert status == 1 and "canceled" in err
            status, out, err = await _cli_over_http(url, "activity", "describe", "no-such-activity")
            assert status == 1 and "not found" in err
    status, out, err = await kadence(kafka_config, "activity", "result", "cli-2")
    assert status == 1 and "canceled" in err


async def test_a_standalone_activitys_stream_holds_the_accepted_attempts_values_only(client, processors):
    processors.start()
    processors.start_timers()
    async with _worker(client):
        handle = await client.start_activity(
            narrate, 3, id="narrate-1", task_queue=QUEUE, start_to_close_timeout=T, retry_policy=FAST
        )
        values = [event.value async for event in handle.stream("progress")]  # ends at the close
        assert await handle.result(timeout=30) == 3
    assert values == ["attempt 2 step 0", "attempt 2 step 1", "attempt 2 step 2"]
