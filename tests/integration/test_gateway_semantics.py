"""Signals (with start), queries, describe, cancel and terminate through the HTTP gateway."""

from __future__ import annotations

import asyncio
import uuid

from kadence import Client, Worker

from .conftest import wait_until
from .workflows import Collector


async def test_signal_with_start_query_describe_and_completion(http, gw_config):
    wid = f"gws-{uuid.uuid4().hex[:8]}"
    client = await Client.connect(config=gw_config)
    try:
        async with Worker(client, task_queue="q", workflows=[Collector]):
            body = {
                "signal": "add",
                "input": ["first"],
                "workflow_type": "Collector",
                "task_queue": "q",
                "start_input": [2],
            }
            first = await http.post(f"/v1/workflows/{wid}/signals", json=body, headers={"Idempotency-Key": "s-1"})
            assert first.status_code == 200, first.text
            again = await http.post(f"/v1/workflows/{wid}/signals", json=body, headers={"Idempotency-Key": "s-1"})
            assert again.json() == first.json()

            async def counted():
                r = await http.post(f"/v1/workflows/{wid}/queries/count", json={})
                return r.status_code == 200 and r.json()["result"] == 1

            await wait_until(counted, 30, "the query to see the first signal")
            described = (await http.get(f"/v1/workflows/{wid}")).json()
            assert described["status"] == "running" and described["run_id"] == first.json()["run_id"]

            second = await http.post(f"/v1/workflows/{wid}/signals", json={"signal": "add", "input": ["second"]})
            assert second.status_code == 200
            await client.get_workflow_handle(wid).result(timeout=60)
        done = (await http.get(f"/v1/workflows/{wid}")).json()
        # the describe shape (docs/guide.md, "Describing a run"): the run as the engine holds it
        assert {
            k: done[k]
            for k in (
                "workflow_id",
                "run_id",
                "status",
                "result",
                "workflow_type",
                "signals_received",
                "pending_activities",
            )
        } == {
            "workflow_id": wid,
            "run_id": first.json()["run_id"],
            "status": "completed",
            "result": ["first", "second"],
            "workflow_type": "Collector",
            "signals_received": 2,
            "pending_activities": [],
        }
        assert done["close_time"] is not None and "failure" not in done
        kinds = [e["type"] for e in (await http.get(f"/v1/workflows/{wid}/history")).json()["events"]]
        assert kinds.count("WorkflowSignaled") == 2
    finally:
        await client.close()


async def test_terminate_and_cancel_are_idempotent_and_typed(http):
    wid = f"gwt-{uuid.uuid4().hex[:8]}"
    started = await http.post(
        "/v1/workflows/Collector/start", json={"workflow_id": wid, "task_queue": "q", "input": [5]}
    )
    assert started.status_code == 201
    cancel = await http.post(f"/v1/workflows/{wid}/cancel", json={"reason": "test"}, headers={"Idempotency-Key": "c-1"})
    assert cancel.status_code == 200
    term = await http.post(f"/v1/workflows/{wid}/terminate", json={"reason": "ops"}, headers={"Idempotency-Key": "t-1"})
    again = await http.post(
        f"/v1/workflows/{wid}/terminate", json={"reason": "ops"}, headers={"Idempotency-Key": "t-1"}
    )
    assert term.status_code == again.status_code == 200 and term.json() == again.json()
    described = (await http.get(f"/v1/workflows/{wid}")).json()
    assert described["status"] == "terminated" and described["failure"]["message"] == "ops"
    late = await http.post(f"/v1/workflows/{wid}/cancel", json={}, headers={"Idempotency-Key": "c-2"})
    assert late.status_code == 409 and late.json()["error"]["code"] == "not_running"
    missing = await http.post(f"/v1/workflows/nope-{wid}/signals", json={"signal": "add"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    half = await http.post(f"/v1/workflows/{wid}/signals", json={"signal": "add", "workflow_type": "Collector"})
    assert half.status_code == 400 and half.json()["error"]["field"] == "task_queue"


async def test_history_pages_with_cursors_and_long_polls_for_new_events(http, gw_config):
    wid = f"gwh-{uuid.uuid4().hex[:8]}"
    client = await Client.connect(config=gw_config)
    try:
        started = await http.post(
            "/v1/workflows/Collector/start", json={"workflow_id": wid, "task_queue": "q", "input": [1]}
        )
        assert started.status_code == 201
        first = (await http.get(f"/v1/workflows/{wid}/history", params={"page_size": 1})).json()
        assert [e["seq"] for e in first["events"]] == [1] and first["has_more"] and not first["closed"]
        second = (
            await http.get(f"/v1/workflows/{wid}/history", params={"page_size": 1, "cursor": first["next_cursor"]})
        ).json()
        assert [e["seq"] for e in second["events"]] == [2]
        # nothing new can come while no worker runs the workflow task: a long poll waits, then
        # returns the events that arrive once one does (the task's completion, seq 3 on)
        poll = asyncio.ensure_future(
            http.get(f"/v1/workflows/{wid}/history", params={"cursor": second["next_cursor"], "wait_seconds": 30})
        )
        await asyncio.sleep(0.5)
        assert not poll.done(), "the long poll returned before there was anything new"
        async with Worker(client, task_queue="q", workflows=[Collector]):
            page = (await poll).json()
            assert page["events"] and page["events"][0]["seq"] == 3
            await http.post(f"/v1/workflows/{wid}/signals", json={"signal": "add", "input": ["x"]})
            await client.get_workflow_handle(wid).result(timeout=60)
        bad = await http.get(f"/v1/workflows/{wid}/history", params={"cursor": "not-a-cursor"})
        assert bad.status_code == 400 and bad.json()["error"]["field"].endswith("cursor")
    finally:
        await client.close()


async def test_a_query_right_after_a_signal_over_http_sees_it(http, gw_config):
    """Read your writes over HTTP: each query sent once the signal's 200 came back counts it."""
    wid = f"gwr-{uuid.uuid4().hex[:8]}"
    client = await Client.connect(config=gw_config)
    try:
        async with Worker(client, task_queue="q", workflows=[Collector]):
            started = await http.post(
                "/v1/workflows/Collector/start", json={"workflow_id": wid, "task_queue": "q", "input": [1000]}
            )
            assert started.status_code == 201, started.text
            for n in range(1, 7):
                signaled = await http.post(f"/v1/workflows/{wid}/signals", json={"signal": "add", "input": [n]})
                assert signaled.status_code == 200, signaled.text
                answer = await http.post(f"/v1/workflows/{wid}/queries/count", json={})
                assert answer.status_code == 200 and answer.json()["result"] == n, (n, answer.text)
            await client.get_workflow_handle(wid).terminate(reason="test over")
    finally:
        await client.close()
