"""The HTTP gateway on the real broker, over real HTTP: uvicorn serves ``create_app`` on a free
127.0.0.1 port, a history processor process runs the engine, and an SDK worker runs ThreeSteps.

Errors must be ``{"error": {"code", "message", "field"?}}`` with a stable code and status
(docs/gateway.md): never FastAPI's default 422, never a stack trace.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest

from kadence import Client, Worker
from kadence.gateway import GatewayConfig, create_app

from .gateway_support import checked_client, serve
from .workflows import ThreeSteps, add, double, three_steps_result

START = "/v1/workflows/ThreeSteps/start"


def _start_body(workflow_id: str, **overrides) -> dict:
    return {"workflow_id": workflow_id, "task_queue": "q", "input": [3], **overrides}


# ---------------------------------------------------------------- a run through the gateway


async def test_start_is_idempotent_conflicts_with_409_and_history_shows_the_run(http, gw_config):
    wid = f"gw-{uuid.uuid4().hex[:8]}"
    # no worker yet: the run stays open, so the conflict below is not a race with its completion
    first = await http.post(START, json=_start_body(wid), headers={"Idempotency-Key": "k-1"})
    assert first.status_code == 201, first.text
    body = first.json()
    assert body["workflow_id"] == wid and body["run_id"]
    run_id = body["run_id"]

    retry = await http.post(START, json=_start_body(wid), headers={"Idempotency-Key": "k-1"})
    assert (retry.status_code, retry.json()) == (201, {"workflow_id": wid, "run_id": run_id})

    conflict = await http.post(START, json=_start_body(wid), headers={"Idempotency-Key": "k-2"})
    assert conflict.status_code == 409, conflict.text
    err = conflict.json()["error"]
    assert err["code"] == "already_started" and err["run_id"] == run_id

    client = await Client.connect(config=gw_config)
    try:
        # the Idempotency-Key is the command's request ID: an SDK retry with it gets the same run
        via_sdk = await client.start_workflow(ThreeSteps, 3, id=wid, task_queue="q", request_id="k-1")
        assert via_sdk.run_id == run_id
        async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double]):
            result = await client.get_workflow_handle(wid, run_id=run_id).result(timeout=60)
    finally:
        await client.close()
    assert result == three_steps_result(3) == 108

    resp = await http.get(f"/v1/workflows/{wid}/history")
    assert resp.status_code == 200, resp.text
    hist = resp.json()
    assert hist["workflow_id"] == wid and hist["run_id"] == run_id
    events = hist["events"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert {e["run_id"] for e in events} == {run_id} and {e["workflow_id"] for e in events} == {wid}
    assert events[0]["type"] == "WorkflowExecutionStarted" and events[0]["attributes"]["input"] == [3]
    assert events[-1]["type"] == "WorkflowExecutionCompleted" and events[-1]["attributes"]["result"] == 108
    assert [e["attributes"]["activity_type"] for e in events if e["type"] == "ActivityTaskScheduled"] == [
        "add",
        "double",
        "add",
    ]

    by_run = await http.get(f"/v1/workflows/{wid}/history", params={"run_id": run_id})
    assert by_run.status_code == 200 and by_run.json()["events"] == events

    # a retry after completion still gets the first answer, not a second run
    late = await http.post(START, json=_start_body(wid), headers={"Idempotency-Key": "k-1"})
    assert (late.status_code, late.json()) == (201, {"workflow_id": wid, "run_id": run_id})


async def test_signal_cancel_and_terminate_of_a_closed_run_are_409_not_running(http, gw_config):
    wid = f"gw-closed-{uuid.uuid4().hex[:8]}"
    client = await Client.connect(config=gw_config)
    try:
        async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double]):
            handle = await client.start_workflow(ThreeSteps, 1, id=wid, task_queue="q")
            assert await handle.result(timeout=60) == three_steps_result(1)
    finally:
        await client.close()
    json_type = {"Content-Type": "application/json"}
    for path, body in (
        ("signals", {"signal": "late", "input": []}),
        ("cancel", {"reason": "too late"}),
        ("terminate", {"reason": "too late"}),
    ):
        resp = await http.post(f"/v1/workflows/{wid}/{path}", json=body, headers=json_type)
        assert resp.status_code == 409, (path, resp.text)
        assert resp.json()["error"]["code"] == "not_running" and "completed" in resp.json()["error"]["message"]
    unknown = await http.post(f"/v1/workflows/{wid}-never/signals", json={"signal": "x", "input": []})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"


async def test_workflow_ids_with_spaces_and_non_ascii_work_end_to_end(http):
    wid = f"заказ Ω {uuid.uuid4().hex[:6]}"
    started = await http.post(START, json=_start_body(wid))
    assert started.status_code == 201, started.text
    assert started.json()["workflow_id"] == wid
    hist = await http.get(f"/v1/workflows/{quote(wid, safe='')}/history")
    assert hist.status_code == 200, hist.text
    assert hist.json()["run_id"] == started.json()["run_id"]
    assert (
        hist.json()["events"][0]["workflow_id"] == wid
        and hist.json()["events"][0]["type"] == "WorkflowExecutionStarted"
    )


async def test_a_workflow_id_with_a_slash_is_addressable_encoded_on_every_route(http):
    wid = f"parent-{uuid.uuid4().hex[:6]}/child-1"
    started = await http.post(START, json=_start_body(wid))
    assert started.status_code == 201, started.text
    enc = quote(wid, safe="")
    assert "%2F" in enc
    hist = await http.get(f"/v1/workflows/{enc}/history")
    assert hist.status_code == 200 and hist.json()["events"][0]["workflow_id"] == wid, hist.text
    described = await http.get(f"/v1/workflows/{enc}")
    assert described.status_code == 200 and described.json()["workflow_id"] == wid, described.text
    signaled = await http.post(f"/v1/workflows/{enc}/signals", json={"signal": "approve", "input": ["ok"]})
    assert signaled.status_code == 200 and signaled.json()["workflow_id"] == wid, signaled.text
    ended = await http.post(f"/v1/workflows/{enc}/terminate", json={"reason": "test"})
    assert ended.status_code == 200, ended.text


@pytest.mark.parametrize(
    "bad, why", [("a\nb", "U+000A"), ("a\u0000b", "U+0000"), ("x" * 1001, "over the limit"), ("a\u202eb", "U+202E")]
)
async def test_a_workflow_id_with_a_control_character_is_400_and_starts_nothing(http, bad, why):
    resp = await http.post(START, json=_start_body(bad))
    assert resp.status_code == 400, resp.text
    err = resp.json()["error"]
    assert err["code"] == "invalid_input" and err["field"] == "workflow_id" and why in err["message"]
    # the same in a path, sent encoded: refused before anything is read or produced (a NUL is
    # refused for the whole path: it is what an encoded slash is routed as)
    if len(bad) < 100:
        read = await http.get(f"/v1/workflows/{quote(bad, safe='')}/history")
        assert read.status_code == 400, read.text
        assert read.json()["error"]["field"] == ("path" if "\x00" in bad else "workflow_id"), read.text


async def test_a_task_queue_or_signal_name_with_a_slash_is_400_naming_it(http):
    resp = await http.post(START, json=_start_body("q-slash", task_queue="a/b"))
    assert resp.status_code == 400 and resp.json()["error"]["field"] == "task_queue", resp.text
    resp = await http.post("/v1/workflows/q-slash/signals", json={"signal": "a/b"})
    assert resp.status_code == 400 and resp.json()["error"]["field"] == "signal", resp.text


async def test_start_without_workflow_id_generates_one(http):
    resp = await http.post(START, json={"task_queue": "q", "input": [1]})
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert uuid.UUID(body["workflow_id"]) and body["run_id"]


async def test_concurrent_starts_of_different_workflows_get_their_own_run(http):
    ids = [f"gw-par-{i}-{uuid.uuid4().hex[:6]}" for i in range(5)]
    responses = await asyncio.gather(*(http.post(START, json=_start_body(w)) for w in ids))
    assert [r.status_code for r in responses] == [201] * 5
    assert [r.json()["workflow_id"] for r in responses] == ids
    assert len({r.json()["run_id"] for r in responses}) == 5


async def test_the_same_idempotency_key_on_two_workflows_is_one_start_and_one_422(http):
    """An Idempotency-Key names one request: the same key sent at the same moment for two
    different workflows starts one of them; the other gets a 422 and starts nothing."""
    ids = [f"gw-key-{i}-{uuid.uuid4().hex[:6]}" for i in range(2)]
    key = f"shared-{uuid.uuid4().hex[:6]}"
    responses = await asyncio.gather(
        *(http.post(START, json=_start_body(w), headers={"Idempotency-Key": key}) for w in ids)
    )
    assert sorted(r.status_code for r in responses) == [201, 422], [r.text for r in responses]
    for wid, resp in zip(ids, responses, strict=False):
        hist = await http.get(f"/v1/workflows/{wid}/history")
        if resp.status_code == 201:
            assert hist.status_code == 200, hist.text
            assert resp.json() == {"workflow_id": wid, "run_id": hist.json()["run_id"]}
        else:
            assert resp.json()["error"]["code"] == "idempotency_key_reused"
            assert hist.status_code == 404, f"the refused start of {wid} started it anyway"


# ---------------------------------------------------------------- invalid input is a 400 with the field


async def test_invalid_json_is_400_invalid_json(http):
    resp = await http.post(START, content=b'{"task_queue": "q", ', headers={"Content-Type": "application/json"})
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]["code"] == "invalid_json"


async def test_missing_task_queue_is_400_naming_the_field(http):
    resp = await http.post(START, json={"workflow_id": "x", "input": [1]})
    assert resp.status_code == 400, resp.text
    err = resp.json()["error"]
    assert err["code"] == "invalid_input" and err["field"] == "task_queue"


async def test_input_of_the_wrong_type_is_400_naming_input(http):
    resp = await http.post(START, json=_start_body("x", input="3"))
    assert resp.status_code == 400, resp.text
    err = resp.json()["error"]
    assert err["code"] == "invalid_input" and err["field"] == "input" and "input" in err["message"]


async def test_unknown_field_is_400_naming_it(http):
    resp = await http.post(START, json=_start_body("x", priority=5))
    assert resp.status_code == 400, resp.text
    err = resp.json()["error"]
    assert err["code"] == "invalid_input" and err["field"] == "priority"


@pytest.mark.parametrize(
    "body, field",
    [
        ({"task_queue": "q with spaces"}, "task_queue"),
        ({"task_queue": ""}, "task_queue"),
        ({"task_queue": "q", "workflow_id": ""}, "workflow_id"),
        ({"task_queue": "q", "workflow_id": 17}, "workflow_id"),
        ({"task_queue": 5}, "task_queue"),
    ],
)
async def test_other_invalid_fields_are_400_naming_them(http, body, field):
    resp = await http.post(START, json=body)
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]["field"] == field


@pytest.mark.parametrize(
    "content, content_type",
    [
        (b"", "application/json"),
        (b"[1, 2]", "application/json"),
        (b'"start"', "application/json"),
        (b"\xff\xfe\x00", "application/json"),
    ],
)
async def test_bodies_that_are_not_a_start_request_are_400(http, content, content_type):
    resp = await http.post(START, content=content, headers={"Content-Type": content_type})
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]["code"] in {"invalid_json", "invalid_input"}


async def test_a_body_that_is_not_json_is_415_and_an_oversized_one_413(http, gw_config):
    resp = await http.post(START, content=b'{"task_queue": "q"}', headers={"Content-Type": "text/plain"})
    assert resp.status_code == 415 and resp.json()["error"]["code"] == "unsupported_media_type"
    big = {"workflow_id": "big", "task_queue": "q", "input": ["x" * (2 * 1024 * 1024)]}
    resp = await http.post(START, json=big)
    assert resp.status_code == 413 and resp.json()["error"]["code"] == "payload_too_large"
    # nothing was started
    assert (await http.get("/v1/workflows/big")).status_code == 404


async def test_a_body_under_the_gateway_limit_but_over_kafkas_is_413_naming_both(http):
    """1.5 MiB passes the gateway's 2 MiB body limit but not Kafka's 1 MB message limit: a typed
    413 before anything is written, and the connection stays usable."""
    wid = f"gw-huge-{uuid.uuid4().hex[:8]}"
    for path, body in (
        (START, {"workflow_id": wid, "task_queue": "q", "input": ["x" * (1536 * 1024)]}),
        (
            f"/v1/workflows/{wid}/signals",
            {"signal": "s", "input": ["x" * (1536 * 1024)], "workflow_type": "ThreeSteps", "task_queue": "q"},
        ),
    ):
        resp = await http.post(path, json=body, headers={"Idempotency-Key": f"huge-{path[-7:]}"})
        assert resp.status_code == 413, resp.text
        message = resp.json()["error"]["message"]
        assert resp.json()["error"]["code"] == "payload_too_large"
        assert "2097152" in message and "1000000" in message, message
    # same connection: the next request is answered
    assert (await http.get(f"/v1/workflows/{wid}")).status_code == 404


async def test_overlong_idempotency_key_is_400(http):
    resp = await http.post(START, json=_start_body("x"), headers={"Idempotency-Key": "k" * 500})
    assert resp.status_code == 400, resp.text
    assert "idempotency" in resp.json()["error"]["field"].lower()


# ---------------------------------------------------------------- unknown things are 404


async def test_history_of_an_unknown_workflow_is_404(http):
    resp = await http.get(f"/v1/workflows/nobody-{uuid.uuid4().hex[:8]}/history")
    assert resp.status_code == 404, resp.text
    assert resp.json()["error"]["code"] == "not_found"


async def test_history_of_an_unknown_run_is_404(http):
    resp = await http.get(f"/v1/workflows/nobody-{uuid.uuid4().hex[:8]}/history", params={"run_id": "no-such-run"})
    assert resp.status_code == 404, resp.text
    assert resp.json()["error"]["code"] == "not_found"


async def test_unknown_route_and_wrong_method_use_the_error_shape(http):
    missing = await http.get("/v1/nothing-here")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    wrong = await http.get(START)
    assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "method_not_allowed"


# ---------------------------------------------------------------- the API is described


async def test_openapi_lists_the_operations(http):
    resp = await http.get("/openapi.json")
    assert resp.status_code == 200
    spec = resp.json()
    assert "post" in spec["paths"]["/v1/workflows/{workflow_type}/start"]
    assert "get" in spec["paths"]["/v1/workflows/{workflow_id}/history"]
    start = spec["paths"]["/v1/workflows/{workflow_type}/start"]["post"]
    assert "201" in start["responses"] and "409" in start["responses"]
    # the only 422 is the reused Idempotency-Key, in the error shape (never FastAPI's validation 422)
    assert start["responses"]["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorResponse")
    assert "HTTPValidationError" not in resp.text
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


# ---------------------------------------------------------------- no engine: 503, not a hang


async def test_no_reply_from_the_engine_is_503_with_retry_after(kafka_config):
    """No history processor runs for this namespace: the start times out into a typed 503,
    ``no_reply`` (Kafka took the command; a broker that did not take it is ``unavailable``)."""
    app = create_app(GatewayConfig(kafka=kafka_config, reply_timeout=1.0, auth=False))
    with serve(app) as url:
        async with checked_client(url, allowed_5xx=(503,)) as client:
            started = time.monotonic()
            resp = await client.post(START, json=_start_body("nobody-home"))
            assert time.monotonic() - started < 10
    assert resp.status_code == 503, resp.text
    error = resp.json()["error"]
    assert error["code"] == "no_reply" and "the engine did not answer" in error["message"]
    assert resp.headers["Retry-After"].isdigit()


async def test_readyz_checks_the_broker_and_redis_and_metrics_count_requests(gw_config, engine):
    redis_url = os.environ.get("KADENCE_REDIS_URL")
    assert redis_url, "make test provides Redis (KADENCE_REDIS_URL)"
    with serve(create_app(GatewayConfig(kafka=gw_config, redis_url=redis_url, auth=False))) as url:
        async with checked_client(url) as http:
            ready = await http.get("/readyz")
            assert ready.status_code == 200 and ready.json()["checks"] == {"kafka": "ok", "redis": "ok"}
            await http.get("/v1/workflows/nope/history")
            text = (await http.get("/metrics")).text
            assert (
                'kadence_gateway_requests_total{method="GET",route="/v1/workflows/{workflow_id}/history",status="404"} 1.0'
                in text
            )
    with serve(create_app(GatewayConfig(kafka=gw_config, redis_url="redis://127.0.0.1:1/0", auth=False))) as url:
        async with checked_client(url, allowed_5xx=(503,)) as http:
            down = await http.get("/readyz")
            assert down.status_code == 503 and down.headers["Retry-After"] == "5"
            assert down.json()["checks"]["kafka"] == "ok" and down.json()["checks"]["redis"].startswith("unavailable")


async def test_queues_shows_the_tasks_waiting_on_a_task_queue_and_their_age(http):
    queue = f"unserved-{uuid.uuid4().hex[:6]}"
    started = await http.post(START, json=_start_body(f"gw-{queue}", task_queue=queue))
    assert started.status_code == 201, started.text
    deadline = time.monotonic() + 60
    while True:  # its first workflow task waits: no worker serves the queue
        r = await http.get("/v1/queues", params={"task_queue": queue})
        assert r.status_code == 200, r.text
        doc = r.json()
        if doc["queues"] and doc["queues"][0]["workflow_backlog"] == 1:
            break
        assert time.monotonic() < deadline, doc
        await asyncio.sleep(0.5)
    (row,) = doc["queues"]
    assert row["task_queue"] == queue and row["workflow_oldest_age_s"] is not None
    assert row["activity_backlog"] == 0 and row["activity_oldest_age_s"] is None
    assert [(b["build_id"], b["backlog"]) for b in doc["builds"]] == [(None, 1)]
    everything = (await http.get("/v1/queues")).json()
    assert queue in {q["task_queue"] for q in everything["queues"]}


async def test_a_queues_rate_limits_are_set_shown_and_lifted_over_http(http, caplog):
    queue = f"limited-{uuid.uuid4().hex[:6]}"
    path = f"/v1/queues/{queue}/limits"
    with caplog.at_level(logging.WARNING, logger="kadence.audit"):
        r = await http.put(
            path, json={"activities_per_second": 20, "activity_types": {"charge": 5}, "reason": "stripe"}
        )
    assert r.status_code == 200, r.text
    assert r.json()["activities_per_second"] == 20 and r.json()["activity_types"] == {"charge": 5}
    assert r.json()["identity"].startswith("gateway:") and r.json()["reason"] == "stripe"
    assert any(f"rate limits of task queue {queue}" in m for m in caplog.messages)  # audited
    doc = (await http.get("/v1/queues", params={"task_queue": queue})).json()
    assert doc["queues"][0]["rate_limit"] == "20/s, charge=5/s"
    assert [(x["task_queue"], x["activities_per_second"]) for x in doc["limits"]] == [(queue, 20)]
    # bad input: a typed 400 naming the field, and nothing changes
    for body, field in (
        ({"activities_per_second": 0}, "activities_per_second"),
        ({"activities_per_second": "fast"}, "activities_per_second"),
        ({"activity_types": {"charge": -1}}, "activity_types"),
        ({}, None),
        ({"activities_per_second": 5, "burst": 3}, "burst"),
    ):
        bad = await http.put(path, json=body)
        assert bad.status_code == 400, (body, bad.text)
        if field is not None:
            assert field in bad.text, (body, bad.text)
    assert (await http.put("/v1/queues/bad%20queue!/limits", json={"activities_per_second": 1})).status_code == 400
    assert (await http.get("/v1/queues", params={"task_queue": queue})).json()["limits"][0][
        "activities_per_second"
    ] == 20
    # a concurrency rule: at most 3 charges at once (the processors add it to each one scheduled)
    ruled = await http.put(path, json={"activity_concurrency": {"charge": 3}, "reason": "one connection pool"})
    assert ruled.status_code == 200 and ruled.json()["activity_concurrency"] == {"charge": 3}, ruled.text
    assert (await http.get("/v1/queues", params={"task_queue": queue})).json()["queues"][0][
        "rate_limit"
    ] == "charge<=3 at once"
    bad = await http.put(path, json={"activity_concurrency": {"charge": 0}})
    assert bad.status_code == 400 and "activity_concurrency" in bad.text
    lifted = await http.delete(path, params={"reason": "done"})
    assert lifted.status_code == 200 and lifted.json()["activities_per_second"] is None
    assert lifted.json()["activity_concurrency"] == {}
    doc = (await http.get("/v1/queues", params={"task_queue": queue})).json()
    assert doc["limits"] == [] and doc["queues"] == []


async def test_a_start_names_concurrency_limits_and_the_limits_are_shown_over_http(http):
    """Two starts of one max-1 key on a queue no worker serves: the first holds the slot, the
    second waits (describe says for what), GET /v1/limits shows both in order; a bad limit is
    a 400 that starts nothing."""
    key = f"gw-{uuid.uuid4().hex[:6]}"
    limit = {"name": "tenant", "value": key, "max": 1}
    ids = [f"{key}-{i}" for i in range(2)]
    for wid in ids:
        r = await http.post(START, json=_start_body(wid, task_queue=f"unserved-{key}", concurrency=[limit]))
        assert r.status_code == 201, r.text
    deadline = time.monotonic() + 60
    while True:
        doc = (await http.get("/v1/limits", params={"key": f"tenant={key}"})).json()
        if doc["limits"] and doc["limits"][0]["waiting"] == 1:
            break
        assert time.monotonic() < deadline, doc
        await asyncio.sleep(0.3)
    (shown,) = doc["limits"]
    assert (shown["in_use"], shown["max"]) == (1, 1)
    assert [h["workflow_id"] for h in shown["holders"]] == [ids[0]]
    assert [w["workflow_id"] for w in shown["waiters"]] == [ids[1]]
    described = (await http.get(f"/v1/workflows/{ids[1]}")).json()
    assert described["waiting_for_slot"] == {
        "key": f"tenant={key}",
        "max": 1,
        "in_use": 1,
        "waiting": 1,
        "waiting_before": 0,
        "reason": f"waiting for a slot of tenant={key}: 1 of 1 in use, 0 waiting before it",
    }
    assert (await http.get(f"/v1/workflows/{ids[0]}")).json()["concurrency_slots"] == [
        {"key": f"tenant={key}", "max": 1}
    ]
    for bad in ({"name": "tenant", "value": key, "max": 0}, {"name": "a=b", "value": "x", "max": 1}):
        r = await http.post(START, json=_start_body(f"{key}-bad", concurrency=[bad]))
        assert r.status_code == 400, r.text
    assert (await http.get(f"/v1/workflows/{key}-bad")).status_code == 404


async def test_a_start_names_a_rate_limit_and_a_debounce_over_http(http):
    """A rate limit of 1 per hour over HTTP: the second start is admitted an hour later
    (describe's throttled_until), GET /v1/limits shows the rate; two debounced starts of one ID
    give one run ID; a bad debounce is a 400 that starts nothing."""
    key = f"gw-{uuid.uuid4().hex[:6]}"
    hourly = {"name": "digest", "value": key, "max": 1, "per_seconds": 3600}
    queue = f"unserved-{key}"
    for wid in (f"{key}-0", f"{key}-1"):
        r = await http.post(START, json=_start_body(wid, task_queue=queue, concurrency=[hourly]))
        assert r.status_code == 201, r.text
    deadline = time.monotonic() + 60
    while (described := (await http.get(f"/v1/workflows/{key}-1")).json())["throttled_until"] is None:
        assert time.monotonic() < deadline, described
        await asyncio.sleep(0.3)
    admitted_for = datetime.fromisoformat(described["throttled_until"])
    assert admitted_for - datetime.now(UTC) > timedelta(minutes=59)
    (shown,) = (await http.get("/v1/limits", params={"key": f"digest={key}"})).json()["limits"]
    assert (shown["kind"], shown["max"], shown["per_seconds"], shown["granted"]) == ("rate", 1, 3600, 2)
    assert shown["waiting"] == 1  # admitted for later
    runs = set()
    for i in range(2):
        body = _start_body(f"{key}-d", task_queue=queue, debounce_seconds=600) | {"input": [i]}
        r = await http.post(START, json=body)
        assert r.status_code == 201, r.text
        runs.add(r.json()["run_id"])
    assert len(runs) == 1
    r = await http.post(START, json=_start_body(f"{key}-bad", debounce_seconds=5, debounce_max_seconds=1))
    assert r.status_code == 400 and "debounce_max" in r.text
    assert (await http.get(f"/v1/workflows/{key}-bad")).status_code == 404


async def test_an_operator_sets_and_lifts_a_keys_max_over_http(http):
    key = f"gw-{uuid.uuid4().hex[:6]}"
    path = f"/v1/limits/tenant={key}"
    r = await http.put(path, json={"max": 7, "reason": "bigger tenant"})
    assert r.status_code == 200, r.text
    assert r.json()["max"] == 7 and "set to 7" in r.json()["message"]
    (shown,) = (await http.get("/v1/limits", params={"key": f"tenant={key}"})).json()["limits"]
    assert shown["max"] == 7 and shown["override"]["reason"] == "bigger tenant"
    assert shown["override"]["by"].startswith("gateway:")
    bad = await http.put(path, json={"max": 5, "per_seconds": 0.001})
    assert bad.status_code == 400 and "window" in bad.text
    r = await http.delete(path, params={"reason": "done"})
    assert r.status_code == 200 and r.json()["max"] is None
    (shown,) = (await http.get("/v1/limits", params={"key": f"tenant={key}"})).json()["limits"]
    assert shown["override"] is None


async def test_a_start_names_a_priority_over_http(http):
    """A priority in a start's body: describe shows it (the run's, the default of its activities);
    a level out of range or a key with a control character is a 400 that starts nothing."""
    key = f"gw-{uuid.uuid4().hex[:6]}"
    priority = {"priority_key": 2, "fairness_key": "acme", "fairness_weight": 3}
    r = await http.post(START, json=_start_body(key, task_queue=f"unserved-{key}", priority=priority))
    assert r.status_code == 201, r.text
    described = (await http.get(f"/v1/workflows/{key}")).json()
    assert described["priority"] == {"priority_key": 2, "fairness_key": "acme", "fairness_weight": 3.0}
    plain = f"{key}-plain"
    assert (await http.post(START, json=_start_body(plain, task_queue=f"unserved-{key}"))).status_code == 201
    assert (await http.get(f"/v1/workflows/{plain}")).json()["priority"] is None
    for bad in ({"priority_key": 6}, {"fairness_key": "a\u202eb"}, {"fairness_weight": 0}, {"level": 1}):
        r = await http.post(START, json=_start_body(f"{key}-bad", priority=bad))
        assert r.status_code == 400, (bad, r.text)
    assert (await http.get(f"/v1/workflows/{key}-bad")).status_code == 404
