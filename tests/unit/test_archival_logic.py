"""Archival, pure logic: the PurgeClosedRun transition, the container file and its verification,
the local store, and the retention configuration."""

from __future__ import annotations

import pytest

from kadence.connectors.archiver import ArchiverConfig, parse_duration, retention_from_file
from kadence.processors.effects import BatchView, Outbox
from kadence.processors.state_machine import transition
from kadence.storage import LocalArchiveStore, S3ArchiveStore, open_store
from kadence.topics import KafkaConfig, serde
from kadence.topics.archive import (
    ArchiveStoreConfig,
    archive_key,
    decode_archive,
    encode_archive,
    latest_archived_run,
    read_archived_run,
    verify_archive,
)
from kadence.topics.errors import ArchiveError, ConfigError
from kadence.topics.records import command, history_key, now_ms

from .engine_harness import Harness


def _purge(h: Harness, wf: str, run_id: str, rid: str = "p1"):
    return h.send(wf, "PurgeClosedRun", {"run_id": run_id, "archive_uri": "file:///a", "identity": "t"}, request_id=rid)


def _closed(h: Harness, wf: str = "w1") -> str:
    h.start(wf, "T", [1], request_id=f"start-{wf}")
    run_id = h.store.get_state(wf)["run_id"]
    h.send(wf, "TerminateWorkflow", {"reason": "done", "identity": "t"}, request_id=f"term-{wf}")
    assert h.store.get_state(wf)["status"] == "terminated"
    return run_id


def test_purge_drops_the_state_of_the_current_closed_run():
    h = Harness()
    run_id = _closed(h)
    view, out = BatchView(h.store), Outbox()
    cmd = serde.decode(
        "Command",
        serde.encode(
            "Command",
            command("w1", "PurgeClosedRun", {"run_id": run_id, "archive_uri": None, "identity": "t"}, request_id="p1"),
        ),
    )
    transition(cmd, view, out, now_ms())
    assert view.tombstones() == ["w1"] and view.state("w1") is None
    assert [(r["status"], r["run_id"]) for r in out.replies] == [("ok", run_id)]
    assert out.events == [] and out.tasks == []
    view.commit_into(h.store)
    assert h.store.get_state("w1") is None
    # a retried purge changes nothing and says so
    assert [r["status"] for r in _purge(h, "w1", run_id, "p2").replies] == ["not_found"]


def test_purge_keeps_an_open_run_and_a_newer_run():
    h = Harness()
    h.start("w2", "T", [1], request_id="s1")
    open_run = h.store.get_state("w2")["run_id"]
    assert [r["status"] for r in _purge(h, "w2", open_run).replies] == ["rejected"]
    assert h.store.get_state("w2")["status"] == "running"
    old = _closed(h, "w3")
    h.start("w3", "T", [2], request_id="s2")  # a new run of the same workflow ID
    new = h.store.get_state("w3")["run_id"]
    assert new != old
    out = _purge(h, "w3", old)
    assert [(r["status"], r["run_id"]) for r in out.replies] == [("ok", new)]
    assert h.store.get_state("w3")["run_id"] == new


def test_a_start_after_a_purge_in_the_same_batch_wins():
    h = Harness()
    run_id = _closed(h, "w4")
    view, out = BatchView(h.store), Outbox()
    for body_type, body, rid in (
        ("PurgeClosedRun", {"run_id": run_id, "archive_uri": None, "identity": "t"}, "p1"),
        ("StartWorkflow", {"workflow_type": "T", "task_queue": "q", "input": b"[]"}, "s-new"),
    ):
        cmd = serde.decode("Command", serde.encode("Command", command("w4", body_type, body, request_id=rid)))
        transition(cmd, view, out, now_ms())
    assert view.tombstones() == []  # the new state replaces the old one
    view.commit_into(h.store)
    st = h.store.get_state("w4")
    assert st["status"] == "running" and st["run_id"] != run_id


def _records(wf="w/1", run_id="r1", n=3):
    out = []
    for i in range(1, n + 1):
        ev = {
            "event_id": f"e{i}",
            "aggregate_key": wf,
            "run_id": run_id,
            "seq": i,
            "timestamp_ms": 1000 + i,
            "trace_id": None,
            "request_id": None,
            "attributes": ("WorkflowTaskScheduled", {"task_queue": "q", "attempt": 1}),
        }
        out.append(
            {
                "seq": i,
                "key": history_key(wf, run_id, i),
                "value": serde.encode("HistoryEvent", ev),
                "partition": 2,
                "offset": 10 + i,
            }
        )
    return out


def test_container_file_round_trips_and_verifies_byte_equal():
    recs = _records()
    data = encode_archive("ns", "w/1", "r1", recs)
    run = verify_archive(data, "ns", "w/1", "r1", [r["value"] for r in recs])
    assert run.records == recs
    assert [e["seq"] for e in run.events()] == [1, 2, 3] and all(e["_archived"] for e in run.events())
    with pytest.raises(ArchiveError, match="differs"):
        verify_archive(data, "ns", "w/1", "r1", [recs[0]["value"], recs[2]["value"], recs[1]["value"]])
    with pytest.raises(ArchiveError, match="expected 4"):
        verify_archive(data, "ns", "w/1", "r1", [r["value"] for r in recs] + [b"x"])
    with pytest.raises(ArchiveError, match="names"):
        verify_archive(data, "ns", "w/1", "r2", [r["value"] for r in recs])
    with pytest.raises(ArchiveError):
        decode_archive(data[: len(data) // 2])


def test_local_store_is_atomic_and_confined(tmp_path):
    store = LocalArchiveStore(tmp_path)
    key = archive_key("ns", "orders/42", "r1")
    assert key == "ns/orders%2F42/r1.avro"
    assert archive_key("ns", "..", "r1") == "ns/%2E%2E/r1.avro" and archive_key("ns", ".", "r1") == "ns/%2E/r1.avro"
    uri = store.put(key, encode_archive("ns", "orders/42", "r1", _records("orders/42")))
    assert uri.startswith("file://") and store.list("ns/") == [key]
    assert not [p for p in tmp_path.rglob(".tmp-*")]
    assert read_archived_run(store, "ns", "orders/42", "r1").workflow_id == "orders/42"
    assert read_archived_run(store, "ns", "orders/42", "r9") is None
    assert latest_archived_run(store, "ns", "orders/42").run_id == "r1"
    with pytest.raises(ArchiveError, match="leaves"):
        store.put("../outside.avro", b"x")


def test_retention_configuration(tmp_path):
    assert parse_duration("7d") == 7 * 86400 and parse_duration("500ms") == 0.5 and parse_duration(3) == 3.0
    with pytest.raises(ConfigError):
        parse_duration("soon")
    path = tmp_path / "archive.toml"
    path.write_text('[retention]\ndefault = "3d"\n[retention.namespaces]\norders = "30d"\n')
    assert retention_from_file(str(path), "orders") == 30 * 86400
    assert retention_from_file(str(path), "other") == 3 * 86400
    kafka = KafkaConfig(namespace="orders")
    assert ArchiverConfig(kafka=kafka).retention_s == 7 * 86400  # the default
    assert ArchiverConfig.from_env(kafka, {}, config_file=str(path)).retention_s == 30 * 86400
    env = {"KADENCE_ARCHIVE_RETENTION": "1s", "KADENCE_ARCHIVE_DIR": str(tmp_path)}
    cfg = ArchiverConfig.from_env(kafka, env, config_file=str(path))
    assert cfg.retention_s == 1 and cfg.store.directory == str(tmp_path)
    assert ArchiverConfig.from_env(kafka, env, retention_s=0.0).retention_s == 0.0
    assert isinstance(open_store(ArchiveStoreConfig(directory=str(tmp_path))), LocalArchiveStore)
    assert isinstance(
        open_store(ArchiveStoreConfig(s3_bucket="b", s3_endpoint="http://127.0.0.1:1", s3_region="us-east-1")),
        S3ArchiveStore,
    )
