"""describe on the real broker, the issue-17 case: an activity that keeps failing shows its
attempt, last failure and next retry; a running one shows its last heartbeat and details; the
SDK, the CLI and the gateway answer in one shape."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import httpx

from kadence import ApplicationError, RetryPolicy, Worker, activity, workflow
from kadence.gateway import GatewayConfig, create_app
from kadence.topics import serde
from tests.support.cli import kadence

from .conftest import wait_until
from .gateway_support import serve
from .invariants import histories


@activity.defn
async def always_fails() -> None:
    raise ApplicationError(f"upstream 503 on attempt {activity.info().attempt}", type="Upstream")


@activity.defn
async def long_running() -> str:
    activity.heartbeat({"rows": 1200})
    while not activity.is_cancelled():
        await asyncio.sleep(0.1)
    return "stopped"


@workflow.defn
class Stuck:
    @workflow.run
    async def run(self) -> None:
        policy = RetryPolicy(
            initial_interval=timedelta(milliseconds=200), backoff_coefficient=1.0, maximum_attempts=1000
        )
        t = timedelta(seconds=30)
        await asyncio.gather(
            workflow.execute_activity(always_fails, start_to_close_timeout=t, retry_policy=policy),
            workflow.execute_activity(
                long_running, start_to_close_timeout=timedelta(hours=1), heartbeat_timeout=timedelta(minutes=5)
            ),
        )


async def test_a_failing_activity_shows_in_describe_everywhere(client, processors, kafka_config):
    processors.start()
    processors.start_timers()  # the retries' backoff timers
    async with Worker(client, task_queue="desc", workflows=[Stuck], activities=[always_fails, long_running]):
        handle = await client.start_workflow(Stuck, id="stuck-1", task_queue="desc")

        async def failing_and_beating():
            d = await handle.describe()
            acts = {a["activity_type"]: a for a in d["pending_activities"]}
            return (
                acts.get("always_fails", {}).get("attempt", 0) >= 4
                and acts.get("long_running", {}).get("heartbeat_details") == {"rows": 1200}
            ) and d

        d = await wait_until(failing_and_beating, 60, "four failed attempts and a heartbeat")
        acts = {a["activity_type"]: a for a in d["pending_activities"]}
        failing = acts["always_fails"]
        assert failing["last_failure"]["type"] == "Upstream"
        assert failing["last_failure"]["message"].startswith("upstream 503 on attempt ")
        assert acts["long_running"]["last_heartbeat_time"] is not None
        assert d["status"] == "running" and d["workflow_type"] == "Stuck" and d["history_length"] >= 5
        # the size: the bytes of the run's history records as the topic holds them, up to the describe
        events = histories(kafka_config)[("stuck-1", handle.run_id)]
        assert (
            d["history_size_bytes"]
            == sum(len(serde.encode("HistoryEvent", e)) for e in events if e["seq"] <= d["history_length"])
            > 0
        )

        rc, out, err = await kadence(kafka_config, "describe", "stuck-1")
        assert rc == 0, err
        cli = json.loads(out)
        app = create_app(GatewayConfig(kafka=kafka_config, auth=False, reply_timeout=30.0))
        with serve(app) as url:
            async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                gw = (await http.get("/v1/workflows/stuck-1")).json()
        assert set(cli) == set(d) == set(gw)
        assert {a["activity_type"] for a in gw["pending_activities"]} == {"always_fails", "long_running"}
        await handle.terminate(reason="done looking")
