"""Large payloads on the real broker: a 5 MB input started through the gateway, passed to an
activity, a 5 MB signal and a 5 MB result; the history on Kafka holds small references, and the
SDK, the gateway and the CLI show the payloads themselves. Over the limit, nothing is written."""

from __future__ import annotations

import json

import httpx
import pytest

from kadence import Client, PayloadTooLargeError, Worker, WorkflowNotFoundError, workflow
from kadence.connectors.archiver import Archiver
from kadence.connectors.payload_gc import collect_payloads
from kadence.gateway import GatewayConfig, create_app
from kadence.storage import LocalArchiveStore, open_large_payloads
from kadence.topics.archive import ArchiveStoreConfig
from kadence.topics.large_payloads import MARKER, LargePayloadConfig, LargePayloads, is_reference, payload_key
from tests.support.big_payloads import FIVE_MB, OTHER_FIVE_MB, BigMover, reverse
from tests.support.cli import kadence

from .archival_support import ArchiverThread, archiver_config
from .conftest import wait_until
from .gateway_support import serve


async def test_5_mb_through_gateway_start_activity_signal_and_result(processors, kafka_config, tmp_path, monkeypatch):
    processors.start()
    large = LargePayloadConfig(store=ArchiveStoreConfig(directory=str(tmp_path / "payloads")))
    client = await Client.connect(config=kafka_config, large_payloads=open_large_payloads(large))
    app = create_app(
        GatewayConfig(
            kafka=kafka_config, auth=False, max_body_bytes=16 * 1024 * 1024, reply_timeout=30.0, large_payloads=large
        )
    )
    try:
        async with Worker(client, task_queue="big", workflows=[BigMover], activities=[reverse]):
            with serve(app) as url:
                async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                    resp = await http.post(
                        "/v1/workflows/BigMover/start",
                        json={"workflow_id": "big-1", "task_queue": "big", "input": [FIVE_MB]},
                    )
                    assert resp.status_code == 201, resp.text[:500]
                    handle = client.get_workflow_handle("big-1")
                    await handle.signal("more", OTHER_FIVE_MB)
                    assert await handle.result(timeout=90) == [True, len(FIVE_MB), OTHER_FIVE_MB]
                    shown = (await http.get("/v1/workflows/big-1/history")).json()
        events = await handle.history(raw=True)
    finally:
        await client.close()
    # every payload on Kafka is a reference of a hundred bytes or so
    payloads = {
        e["attributes"][0]: v
        for e in events
        for k, v in e["attributes"][1].items()
        if isinstance(v, bytes) and k in ("input", "result")
    }
    assert set(payloads) >= {
        "WorkflowExecutionStarted",
        "ActivityTaskScheduled",
        "ActivityTaskCompleted",
        "WorkflowSignaled",
        "WorkflowExecutionCompleted",
    }, sorted(payloads)
    assert all(is_reference(v) and len(v) < 120 for v in payloads.values())
    # the gateway's history shows them resolved
    started = next(e for e in shown["events"] if e["type"] == "WorkflowExecutionStarted")
    assert started["attributes"]["input"] == [FIVE_MB]
    # and so does the CLI, with the store configured
    monkeypatch.setenv("KADENCE_PAYLOAD_DIR", str(tmp_path / "payloads"))
    rc, out, err = await kadence(kafka_config, "history", "big-1")
    assert rc == 0, err[-2000:]
    signaled = next(e for e in json.loads(out) if e["type"] == "WorkflowSignaled")
    assert signaled["attributes"]["input"] == [OTHER_FIVE_MB]


async def test_over_the_limit_nothing_is_written(processors, kafka_config, tmp_path):
    processors.start()
    store = open_large_payloads(
        LargePayloadConfig(store=ArchiveStoreConfig(directory=str(tmp_path)), limit=1024 * 1024)
    )
    client = await Client.connect(config=kafka_config, large_payloads=store)
    try:
        with pytest.raises(PayloadTooLargeError, match="over the payload limit of 1048576 bytes"):
            await client.start_workflow(BigMover, FIVE_MB, id="too-big", task_queue="big")
        with pytest.raises(WorkflowNotFoundError):
            await client.get_workflow_handle("too-big").describe(timeout=10)
    finally:
        await client.close()
    assert list(tmp_path.rglob("*.bin")) == []


@workflow.defn
class Echo:
    @workflow.run
    async def run(self, blob: str) -> str:
        return blob


async def test_gc_keeps_what_a_history_or_archive_refers_to_and_deletes_the_rest(processors, kafka_config, tmp_path):
    """A payload referenced by a live history is kept; one nobody refers to is deleted after the
    grace period (a dry run deletes nothing); a run the archiver deleted from Kafka keeps its
    payloads while its archive file exists, and loses them once that is gone too."""
    processors.start()
    store = LocalArchiveStore(tmp_path / "payloads")
    client = await Client.connect(config=kafka_config, large_payloads=LargePayloads(store))
    try:
        async with Worker(client, task_queue="gc", workflows=[Echo]):
            kept = await client.execute_workflow(Echo, "k" * 400_000, id="gc-kept", task_queue="gc")
            archived = await client.execute_workflow(Echo, "a" * 400_000, id="gc-archived", task_queue="gc")
        assert kept == "k" * 400_000 and archived == "a" * 400_000
    finally:
        await client.close()
    orphan = LargePayloads(store).offload(b'"' + b"o" * 400_000 + b'"')  # stored, never sent
    keys = set(store.list("payloads/", suffix=".bin"))
    assert len(keys) == 5  # each run's input (an array) and result, and the orphan

    def gc(**kw):
        return collect_payloads(
            kafka_config,
            store,
            namespaces=[kafka_config.namespace],
            archive=LocalArchiveStore(tmp_path / "archive"),
            **kw,
        )

    young = gc(grace_s=3600)
    assert young.deleted == [] and young.young == 1 and young.referenced == 4
    dry = gc(grace_s=0, dry_run=True)
    assert len(dry.deleted) == 1 and set(store.list("payloads/", suffix=".bin")) == keys
    orphan_key = payload_key(orphan[len(MARKER) : len(MARKER) + 64].decode())
    assert gc(grace_s=0).deleted == [orphan_key]
    assert set(store.list("payloads/", suffix=".bin")) == keys - {orphan_key}

    # the archiver moves gc-archived's run out of Kafka (and, by its retention, gc-kept's too)
    archiver = Archiver(archiver_config(kafka_config, tmp_path / "archive", retention_s=0.0, sweep_interval_s=0.2))
    with ArchiverThread(archiver):
        await wait_until(lambda: archiver.status()["archived"] == 2, 60, "the runs to be archived")
    assert gc(grace_s=0).deleted == []  # the archive files still refer to both
    (archived_file,) = [p for p in (tmp_path / "archive").rglob("*.avro") if "gc-archived" in str(p)]
    archived_file.unlink()  # the archive's own retention removed it: the run is gone
    gone = gc(grace_s=0)
    assert len(gone.deleted) == 2 and len(store.list("payloads/", suffix=".bin")) == 2
