"""The client commands over the HTTP gateway (issue 48 item 4): with KADENCE_GATEWAY_URL and
KADENCE_API_KEY set, ``kadence start/signal/query/describe/history/pause/unpause/terminate/cancel``
go through the gateway and never to Kafka (the bootstrap given points nowhere), answer as the
Kafka path does, and report the gateway's refusals as ``error: ...`` with exit 1. The time per
call is measured by ``make bench`` (scenario ``cli``), not here."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from kadence import Client, Worker
from tests.support.cli import kadence

from .conftest import wait_until
from .gateway_support import redis_url
from .workflows import Collector


async def over_http(url: str, key: str | None, *args: str, timeout: float = 60) -> tuple[int, str, str]:
    """``kadence ARGS`` with the gateway's URL and key, and a Kafka bootstrap where nothing listens."""
    env = {**os.environ, "KADENCE_GATEWAY_URL": url, "KADENCE_KAFKA_BOOTSTRAP": "127.0.0.1:9"}
    env.pop("KADENCE_API_KEY", None)
    if key is not None:
        env["KADENCE_API_KEY"] = key
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kadence.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode, out.decode(), err.decode()


async def test_the_client_commands_drive_a_workflow_through_the_gateway(gw_config, gateway_url, api_key, gw_projection):
    client = await Client.connect(config=gw_config)
    try:
        async with Worker(client, task_queue="q", workflows=[Collector]):
            url, key = gateway_url, api_key
            rc, out, err = await over_http(
                url, key, "start", "Collector", "--id", "cli-gw-1", "--task-queue", "q", "--input", "[2]"
            )
            assert rc == 0, err
            run_id = json.loads(out)["run_id"]
            for _ in range(2):  # the same request ID twice: delivered once
                rc, _out, err = await over_http(
                    url, key, "signal", "cli-gw-1", "add", "--input", '["a"]', "--request-id", "r1"
                )
                assert rc == 0, err

            async def one_item():
                rc, out, _ = await over_http(url, key, "query", "cli-gw-1", "count")
                return rc == 0 and json.loads(out) == 1

            await wait_until(one_item, 60, "the signal to be seen by the query")
            rc, out, err = await over_http(url, key, "describe", "cli-gw-1")
            described = json.loads(out)
            assert rc == 0 and described["status"] == "running" and described["run_id"] == run_id
            # the same document as over Kafka
            rc, kafka_out, err = await kadence(gw_config, "describe", "cli-gw-1")
            assert rc == 0, err
            assert set(json.loads(kafka_out)) == set(described)
            rc, out, err = await over_http(url, key, "describe", "cli-gw-1", "-o", "table")
            assert rc == 0 and any(line.split()[:2] == ["status", "running"] for line in out.splitlines()), out
            for action in ("pause", "unpause"):
                rc, _out, err = await over_http(url, key, action, "cli-gw-1", "--reason", "checking")
                assert rc == 0, err

            # --follow prints events as they come and ends when the run closes
            follow = asyncio.create_task(over_http(url, key, "history", "cli-gw-1", "--follow", timeout=120))
            await asyncio.sleep(1.0)
            rc, _out, err = await over_http(url, key, "signal", "cli-gw-1", "add", "--input", '["b"]')
            assert rc == 0, err
            rc, out, err = await follow
            assert rc == 0, err
            followed = [json.loads(line)["type"] for line in out.splitlines()]
            assert followed[0] == "WorkflowExecutionStarted" and followed[-1] == "WorkflowExecutionCompleted"
            assert followed.count("WorkflowSignaled") == 2 and "WorkflowExecutionPaused" in followed

            rc, out, err = await over_http(url, key, "history", "cli-gw-1")
            assert rc == 0 and [e["type"] for e in json.loads(out)] == followed
            rc, out, err = await over_http(url, key, "history", "cli-gw-1", "-o", "table")
            assert rc == 0 and "WorkflowExecutionCompleted" in out

            rc, out, err = await over_http(
                url, key, "start", "Collector", "--id", "cli-gw-2", "--task-queue", "q", "--input", "[0]", "--wait"
            )
            assert rc == 0, err
            assert json.loads(out)["result"] == []
            gw2_run = json.loads(out)["run_id"]

            # list: the visibility projection through the gateway, what `kadence list` reads from Redis
            async def both_listed():
                rc, out, _ = await over_http(url, key, "list", "--type", "Collector", "-o", "json")
                ids = {r["workflow_id"] for r in json.loads(out)["items"]} if rc == 0 else set()
                return {"cli-gw-1", "cli-gw-2"} <= ids and ids

            listed = await wait_until(both_listed, 60, "both runs in the list")
            redis = ["--redis-url", redis_url()]
            rc, out, err = await kadence(gw_config, "list", "--type", "Collector", "-o", "json", *redis)
            assert rc == 0 and {r["workflow_id"] for r in json.loads(out)["items"]} == listed, err
            rc, out_http, err = await over_http(url, key, "list", "--type", "Collector", "--count", "-o", "json")
            assert rc == 0, err
            rc, out_direct, err = await kadence(
                gw_config, "list", "--type", "Collector", "--count", "-o", "json", *redis
            )
            assert json.loads(out_http) == json.loads(out_direct) and json.loads(out_http)["total"] == 2
            # reset: the plan of a dry run, as over Kafka, then the reset itself
            rc, out, err = await over_http(url, key, "reset", "cli-gw-2", "--dry-run")
            assert rc == 0, err
            rc, kafka_out, err = await kadence(gw_config, "reset", "cli-gw-2", "--dry-run")
            assert rc == 0, err
            assert json.loads(out) == json.loads(kafka_out) and json.loads(out)["dry_run"] is True
            rc, out, err = await over_http(url, key, "reset", "cli-gw-2", "--reason", "again")
            assert rc == 0 and json.loads(out)["new_run_id"] not in (None, gw2_run), err
            assert await client.get_workflow_handle("cli-gw-2").result(timeout=60) == []
    finally:
        await client.close()

    # refusals: the gateway's message, exit 1, no traceback
    rc, _out, err = await over_http(gateway_url, api_key, "cancel", "cli-gw-1")
    assert rc == 1 and err.startswith("error: ") and "Traceback" not in err
    rc, _out, err = await over_http(gateway_url, api_key, "describe", "no-such-workflow")
    assert rc == 1 and "error: " in err
    rc, _out, err = await over_http(gateway_url, "not-a-key", "describe", "cli-gw-1")
    assert rc == 1 and "error: " in err and "Traceback" not in err
    rc, _out, err = await over_http("http://127.0.0.1:9", api_key, "describe", "cli-gw-1")
    assert rc == 1 and "did not answer" in err
    rc, _out, err = await over_http(gateway_url, api_key, "signal", "cli-gw-1", "add", "--input", "{bad")
    assert rc == 2 and "not JSON" in err
