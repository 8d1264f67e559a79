"""Workflow streams as Server-Sent Events through the gateway (issue 47 item 2): 100 clients
follow one workflow's stream live, one of them drops its connection and resumes with
Last-Event-ID; each gets every value once, in order, and the end; ten more that connect after the
close read it all; a closed workflow that never published ends at once; bad input is a 400/404."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx

from kadence import Client, Worker, activity, workflow

from .gateway_support import auth

T = timedelta(seconds=30)
READERS = 100


@activity.defn
async def chapter(n: int) -> int:
    for line in range(5):
        activity.publish("book", f"chapter {n} line {line}")
    return n


@workflow.defn
class Book:
    def __init__(self) -> None:
        self.go = False

    @workflow.signal
    def begin(self) -> None:
        self.go = True

    @workflow.run
    async def run(self, chapters: int) -> int:
        await workflow.wait_condition(lambda: self.go)
        for n in range(chapters):
            await workflow.execute_activity(chapter, n, start_to_close_timeout=T)
            workflow.publish("book", f"chapter {n} done")
        return chapters


@workflow.defn
class Quiet:
    @workflow.run
    async def run(self) -> str:
        return "quiet"


EXPECTED = [v for n in range(4) for v in [*(f"chapter {n} line {i}" for i in range(5)), f"chapter {n} done"]]


async def _read(http: httpx.AsyncClient, path: str, headers: dict | None = None, stop_after: int | None = None):
    """(id, event, data) of each event until the end (or ``stop_after`` values: then it hangs up)."""
    out: list[tuple[str | None, str, str]] = []
    async with http.stream("GET", path, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        async for line in response.aiter_lines():
            if line.startswith(":"):
                continue
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
                continue
            if not fields:
                continue
            out.append((fields.get("id"), fields.get("event", "message"), fields.get("data", "")))
            fields = {}
            if out[-1][1] == "end" or (stop_after is not None and len(out) >= stop_after):
                break
    return out


def _values(events) -> list[str]:
    import json

    return [json.loads(data)["value"] for _id, kind, data in events if kind == "value"]


async def test_a_hundred_readers_and_a_resumed_one_each_get_every_value_once(gw_config, gateway_url, api_key):
    client = await Client.connect(config=gw_config)
    limits = httpx.Limits(max_connections=READERS + 20, max_keepalive_connections=READERS + 20)
    path = "/v1/workflows/book-1/streams/book"
    try:
        async with (
            Worker(client, task_queue="books", workflows=[Book], activities=[chapter]),
            httpx.AsyncClient(base_url=gateway_url, headers=auth(api_key), timeout=90, limits=limits) as http,
        ):
            handle = await client.start_workflow(Book, 4, id="book-1", task_queue="books")
            readers = [asyncio.ensure_future(_read(http, path)) for _ in range(READERS)]
            await handle.signal(Book.begin)
            dropped = await _read(http, path, stop_after=7)  # hangs up after seven values
            last_id = dropped[-1][0]
            resumed = await _read(http, path, headers={"Last-Event-ID": last_id})
            assert await handle.result() == 4
            seen = await asyncio.wait_for(asyncio.gather(*readers), 90)
            late = await asyncio.gather(*(_read(http, path) for _ in range(10)))
    finally:
        await client.close()
    for i, events in enumerate([*seen, *late]):
        assert _values(events) == EXPECTED, (i, [e[0] for e in events], [e[0] for e in seen[0]])
        assert events[-1][1] == "end"
        ids = [int(i) for i, kind, _ in events if kind == "value"]
        assert ids == sorted(set(ids))
    assert _values(dropped) + _values(resumed) == EXPECTED  # nothing lost, nothing twice
    assert resumed[-1][1] == "end"


async def test_a_quiet_workflow_ends_at_once_and_bad_requests_are_refused(gw_config, gateway_url, api_key):
    client = await Client.connect(config=gw_config)
    try:
        async with (
            Worker(client, task_queue="quiet", workflows=[Quiet]),
            httpx.AsyncClient(base_url=gateway_url, headers=auth(api_key), timeout=60) as http,
        ):
            await client.execute_workflow(Quiet, id="quiet-1", task_queue="quiet")
            assert await _read(http, "/v1/workflows/quiet-1/streams/any") == [(None, "end", "{}")]
            missing = await http.get("/v1/workflows/no-such-workflow/streams/any")
            assert missing.status_code == 404, missing.text
            bad = await http.get("/v1/workflows/quiet-1/streams/any", headers={"Last-Event-ID": "yesterday"})
            assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_input", bad.text
    finally:
        await client.close()


async def test_the_cli_follows_a_stream_over_kafka_and_over_the_gateway(gw_config, gateway_url, api_key):
    import json
    import os
    import sys

    from tests.support.cli import kadence

    client = await Client.connect(config=gw_config)
    try:
        async with Worker(client, task_queue="books-cli", workflows=[Book], activities=[chapter]):
            handle = await client.start_workflow(Book, 1, id="book-cli", task_queue="books-cli")
            await handle.signal(Book.begin)
            assert await handle.result() == 1
    finally:
        await client.close()
    status, out, err = await kadence(gw_config, "stream", "book-cli", "book")
    assert status == 0, err
    over_kafka = [json.loads(line) for line in out.splitlines()]
    assert [e["value"] for e in over_kafka] == EXPECTED[:6]
    assert {e["activity_id"] for e in over_kafka[:5]} == {"1"} and over_kafka[5]["activity_id"] is None
    env = {**os.environ, "KADENCE_GATEWAY_URL": gateway_url, "KADENCE_API_KEY": api_key}
    env["KADENCE_KAFKA_BOOTSTRAP"] = "127.0.0.1:9"  # nothing of it over Kafka
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kadence.cli", "stream", "book-cli", "book", "--after", str(over_kafka[2]["id"]),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    out_b, err_b = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err_b.decode()
    over_http = [json.loads(line) for line in out_b.decode().splitlines()]
    assert over_http == over_kafka[3:]  # the same lines, resumed after the third
    status, _out, err = await kadence(gw_config, "stream", "no-such-workflow", "book")
    assert status == 1 and "not found" in err.lower(), err
