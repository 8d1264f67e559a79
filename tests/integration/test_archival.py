"""Archival on the real broker and Redis: closed runs leave Kafka for verified archive files (a
local directory, or S3 on a loopback moto server) and stay readable, marked archived."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import httpx
import pytest

from kadence.connectors.archiver import Archiver
from kadence.gateway import GatewayConfig, create_app
from kadence.storage import LocalArchiveStore, S3ArchiveStore
from kadence.topics import EngineClient, WorkflowNotFoundError, serde
from kadence.topics.archive import ArchiveStoreConfig, archive_key, read_history, verify_archive
from kadence.topics.state_reader import read_states
from tests.support.net import free_port

from .archival_support import ArchiverThread, archiver_config, closed_runs, live_history
from .conftest import wait_until
from .gateway_support import serve

N = 12


async def _engine(config) -> EngineClient:
    return await asyncio.get_running_loop().run_in_executor(None, EngineClient, config)


async def test_closed_runs_are_archived_tombstoned_and_read_back(client, processors, kafka_config, tmp_path):
    processors.start()
    ns = kafka_config.namespace
    runs = await closed_runs(client, N, "arch")
    still_open = await client.start_workflow("Trivial", 0, id="arch-open", task_queue="q")
    before = live_history(kafka_config)
    assert all(len(before[r]) == 3 for r in runs)  # started, task scheduled, terminated
    store = LocalArchiveStore(tmp_path / "archive")

    # a first archiver with the default retention (7 days) only takes note of the runs...
    first = Archiver(archiver_config(kafka_config, tmp_path / "archive", sweep_interval_s=0.2), store=store)
    with ArchiverThread(first):
        await wait_until(lambda: first.status()["closed_waiting"] == N, 60, "the closed runs to be noted")
    assert first.status()["archived"] == 0 and store.list(f"{ns}/") == []
    # ...then one run's archive is written as if an archiver crashed right after step 1
    wf0, run0 = runs[0]
    assert first._write_verified(f"{wf0}/{run0}")[0] == "archived"
    assert len(live_history(kafka_config)) == N + 1  # nothing left Kafka yet

    archiver = Archiver(
        archiver_config(kafka_config, tmp_path / "archive", retention_s=0.0, sweep_interval_s=0.2), store=store
    )
    with ArchiverThread(archiver):
        await wait_until(
            lambda: archiver.status()["archived"] + archiver.status()["reused"] == N,
            60,
            "every closed run to be archived",
        )
        status = archiver.status()
    assert (status["archived"], status["reused"], status["due"], status["held"]) == (N - 1, 1, 0, 0)

    # Kafka: the closed runs are tombstoned, the open run is untouched
    after = live_history(kafka_config)
    assert set(after) == {("arch-open", still_open.run_id)}
    # the archive: one verified, byte-equal file per run
    for wf, run_id in runs:
        verify_archive(store.get(archive_key(ns, wf, run_id)), ns, wf, run_id, before[(wf, run_id)])
    # the processor forgets the closed workflows' state, keeps the open one's
    await wait_until(lambda: set(read_states(kafka_config)) == {"arch-open"}, 60, "the states to be purged")

    engine = await _engine(kafka_config)
    try:
        found = await read_history(engine, store, wf0)  # the current run: purged, so the archive
        assert found.archived and found.run_id == run0
        assert [{k: v for k, v in e.items() if not k.startswith("_")} for e in found.events] == [
            serde.decode("HistoryEvent", v) for v in before[(wf0, run0)]
        ]
        wf1, run1 = runs[1]
        found = await read_history(engine, store, wf1, run1)
        assert found.archived and [e["seq"] for e in found.events] == [1, 2, 3]
        assert all(e["_archived"] for e in found.events)
        live = await read_history(engine, store, "arch-open")
        assert not live.archived and live.run_id == still_open.run_id
        with pytest.raises(WorkflowNotFoundError):
            await read_history(engine, None, wf1)
    finally:
        engine.close()

    # the gateway's history operation serves the archived run, marked archived, byte-equal
    gw = GatewayConfig(kafka=kafka_config, auth=False, archive=ArchiveStoreConfig(directory=str(tmp_path / "archive")))
    with serve(create_app(gw)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            resp = await http.get(f"/v1/workflows/{wf0}/history")
            assert resp.status_code == 200, resp.text
            body = resp.json()
            assert body["archived"] is True and body["closed"] is True and body["run_id"] == run0
            assert [e["seq"] for e in body["events"]] == [
                serde.decode("HistoryEvent", v)["seq"] for v in before[(wf0, run0)]
            ]
            live = await http.get("/v1/workflows/arch-open/history")
            assert live.status_code == 200 and live.json()["archived"] is False

    # the CLI falls back to the archive and says so
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kadence.cli",
        "--bootstrap",
        kafka_config.bootstrap,
        "--namespace",
        ns,
        "history",
        "arch-2",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "KADENCE_ARCHIVE_DIR": str(tmp_path / "archive")},
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    events = json.loads(out)
    assert [e["type"] for e in events] == [
        "WorkflowExecutionStarted",
        "WorkflowTaskScheduled",
        "WorkflowExecutionTerminated",
    ]
    assert all(e["archived"] is True for e in events) and "archived" in err.decode()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kadence.cli",
        "--bootstrap",
        kafka_config.bootstrap,
        "--namespace",
        ns,
        "archive",
        "status",
        "--retention",
        "0s",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    reported = json.loads(out)
    assert (reported["archived"], reported["reused"], reported["due"], reported["held"]) == (N - 1, 1, 0, 0)

    # a restarted processor restores without the tombstoned runs; the workflow ID starts afresh
    processors.stop()
    processors.start()
    again = await client.start_workflow("Trivial", 1, id=wf0, task_queue="q", id_reuse_policy="reject_duplicate")
    assert again.run_id != run0
    assert (await still_open.describe())["status"] == "running"


@pytest.fixture
def s3_client():
    """An S3 API on loopback (moto's server), and a boto3 client for it."""
    import boto3  # dev dependencies
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{port}",
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
    finally:
        server.stop()


async def test_archive_to_an_s3_bucket(client, processors, kafka_config, tmp_path, s3_client):
    processors.start()
    ns = kafka_config.namespace
    s3_client.create_bucket(Bucket="kadence-archive")
    store = S3ArchiveStore("kadence-archive", prefix="prod", client=s3_client)
    runs = await closed_runs(client, 4, "s3")
    before = live_history(kafka_config)
    archiver = Archiver(archiver_config(kafka_config, tmp_path, retention_s=0.0, sweep_interval_s=0.2), store=store)
    with ArchiverThread(archiver):
        await wait_until(lambda: archiver.status()["archived"] == 4, 60, "the runs to be archived to S3")
    assert live_history(kafka_config) == {}
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket="kadence-archive")["Contents"]]
    assert sorted(keys) == sorted(f"prod/{archive_key(ns, wf, r)}" for wf, r in runs)
    for wf, run_id in runs:
        verify_archive(store.get(archive_key(ns, wf, run_id)), ns, wf, run_id, before[(wf, run_id)])
    await wait_until(lambda: read_states(kafka_config) == {}, 60, "the states to be purged")
    engine = await _engine(kafka_config)
    try:
        found = await read_history(engine, store, runs[3][0])
        assert found.archived and found.run_id == runs[3][1] and len(found.events) == 3
    finally:
        engine.close()
