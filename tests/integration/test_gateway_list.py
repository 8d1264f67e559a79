"""``GET /v1/workflows`` (list from the visibility projection), read-your-writes with the
consistency token, start options (search attributes, timeouts, ``wait_seconds``) and the
projection lag in ``/readyz``: real broker, Redis, projection process and HTTP."""

from __future__ import annotations

import asyncio
import uuid

from kadence import Client, Worker

from .gateway_support import auth, checked_client
from .workflows import ThreeSteps, add, double, three_steps_result

START = "/v1/workflows/ThreeSteps/start"


async def test_list_filters_pages_and_reads_its_own_writes(gateway_url, api_key, gw_config, gw_projection):
    tag = uuid.uuid4().hex[:8]
    async with checked_client(gateway_url, headers=auth(api_key)) as http:
        # a start with search attributes; the token in its response makes the next list wait for it
        r = await http.post(
            START,
            json={
                "workflow_id": f"ls-a-{tag}",
                "task_queue": "lq",
                "input": [1],
                "search_attributes": {"tag": tag, "tier": "gold"},
            },
            headers={"Idempotency-Key": f"ls-a-{tag}"},
        )
        assert r.status_code == 201, r.text
        token = r.headers["Kadence-Consistency-Token"]
        listed = await http.get("/v1/workflows", params={"search": f"tag:{tag}", "consistency_token": token})
        assert listed.status_code == 200, listed.text
        rows = listed.json()["workflows"]
        assert [(w["workflow_id"], w["status"], w["search_attributes"]) for w in rows] == [
            (f"ls-a-{tag}", "running", {"tag": tag, "tier": "gold"})
        ]
        assert rows[0]["run_id"] == r.json()["run_id"] and rows[0]["workflow_type"] == "ThreeSteps"

        # four more, two of them completed by a worker through start's wait_seconds
        client = await Client.connect(config=gw_config)
        try:
            async with Worker(client, task_queue="lq", workflows=[ThreeSteps], activities=[add, double]):
                for i in range(2):
                    done = await http.post(
                        START,
                        json={
                            "workflow_id": f"ls-done{i}-{tag}",
                            "task_queue": "lq",
                            "input": [i + 2],
                            "wait_seconds": 30,
                            "search_attributes": {"tag": tag},
                        },
                    )
                    assert done.status_code == 201, done.text
                    assert (done.json()["status"], done.json()["result"]) == ("completed", three_steps_result(i + 2))
                    last_token = done.headers["Kadence-Consistency-Token"]
                # the first run completes too now that a worker is there; wait for it through the SDK
                await client.get_workflow_handle(f"ls-a-{tag}").result(timeout=60)
        finally:
            await client.close()
        for i in range(2):
            r = await http.post(
                START,
                json={
                    "workflow_id": f"ls-open{i}-{tag}",
                    "task_queue": "nobody",
                    "input": [0],
                    "search_attributes": {"tag": tag},
                    "run_timeout_seconds": 3600,
                    "wait_seconds": 0.2,
                },
            )
            assert r.status_code == 201 and r.json()["status"] == "running", r.text
            last_token = r.headers["Kadence-Consistency-Token"]

        async def ids(**params) -> list[str]:
            out, cursor = [], None
            while True:
                page = await http.get(
                    "/v1/workflows",
                    params={
                        "search": f"tag:{tag}",
                        "page_size": 2,
                        "consistency_token": last_token,
                        **params,
                        **({"cursor": cursor} if cursor else {}),
                    },
                )
                assert page.status_code == 200, page.text
                body = page.json()
                assert len(body["workflows"]) <= 2
                out += [w["workflow_id"] for w in body["workflows"]]
                cursor = body["next_cursor"]
                if not cursor:
                    return sorted(out)

        everything = sorted([f"ls-a-{tag}", f"ls-done0-{tag}", f"ls-done1-{tag}", f"ls-open0-{tag}", f"ls-open1-{tag}"])
        assert await ids() == everything
        assert await ids(status="running") == [f"ls-open0-{tag}", f"ls-open1-{tag}"]
        # the first run's completion may still be on its way to the projection: wait for it by polling
        for _ in range(100):
            if len(await ids(status="completed")) == 3:
                break
            await asyncio.sleep(0.1)
        assert await ids(status="completed") == [f"ls-a-{tag}", f"ls-done0-{tag}", f"ls-done1-{tag}"]
        assert await ids(type="NoSuchType") == []
        counted = await http.get("/v1/workflows", params={"search": f"tag:{tag}", "include_counts": "true"})
        assert counted.json()["counts"]["total"] == 5
        assert counted.json()["counts"]["by_status"] == {"completed": 3, "running": 2}

        # bad input is a typed 400 naming the field; nothing is listed from another namespace
        bad = await http.get("/v1/workflows", params={"search": "no-colon"})
        assert bad.status_code == 400 and bad.json()["error"]["field"] == "query.search"
        bad = await http.get("/v1/workflows", params={"cursor": "garbage!"})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_input"
        bad = await http.get("/v1/workflows", params={"status": "sleeping"})
        assert bad.status_code == 400 and bad.json()["error"]["field"] == "query.status"

        ready = await http.get("/readyz")
        assert ready.status_code == 200, ready.text
        lag = ready.json()["projections"]
        assert lag["running"] is True and lag["events"] is not None, lag
