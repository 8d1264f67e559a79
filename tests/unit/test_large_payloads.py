"""Large payloads (``kadence.topics.large_payloads``): over the threshold a payload is stored once
under its hash and the record carries a reference; reading resolves it (checked against the
hash); over the limit nothing is written; a reference with no store, or a missing or altered
object, is a ``SchemaError`` that names the cause; a workflow moves a 5 MB payload through its
start, an activity, a signal and its result with no broker (``kadence.testing``)."""

from __future__ import annotations

import asyncio
import base64
import hashlib

import pytest

from kadence import PayloadTooLargeError, SchemaError, activity, workflow
from kadence.storage import LocalArchiveStore, open_large_payloads
from kadence.testing import WorkflowEnvironment
from kadence.topics.archive import ArchiveStoreConfig
from kadence.topics.errors import ConfigError
from kadence.topics.large_payloads import (
    MARKER,
    LargePayloadConfig,
    LargePayloads,
    is_reference,
    payload_key,
    references_in,
)
from kadence.topics.payload import JsonConverter
from tests.support.big_payloads import FIVE_MB, OTHER_FIVE_MB, BigMover, T, reverse
from tests.unit.docs_examples import run_example

BIG = "x" * 300_000


class CountingStore(LocalArchiveStore):
    def __init__(self, root):
        super().__init__(root)
        self.puts = 0
        self.gets = 0

    def put(self, key, data):
        self.puts += 1
        return super().put(key, data)

    def get(self, key):
        self.gets += 1
        return super().get(key)


def test_small_payloads_stay_inline_and_large_ones_become_references(tmp_path):
    store = CountingStore(tmp_path)
    conv = JsonConverter(large=LargePayloads(store))
    small = conv.to_bytes({"a": 1})
    assert small == b'{"a":1}' and store.puts == 0
    ref = conv.to_bytes(BIG)
    assert is_reference(ref) and len(ref) < 200 and store.puts == 1
    digest = hashlib.sha256(f'"{BIG}"'.encode()).hexdigest()
    assert ref == MARKER + digest.encode() + b" " + str(len(BIG) + 2).encode()
    assert (tmp_path / payload_key(digest)).read_bytes() == f'"{BIG}"'.encode()
    # the same bytes again: the same object, the same reference
    assert conv.to_bytes(BIG) == ref
    assert store.list("payloads/", suffix=".bin") == [payload_key(digest)]


def test_a_reference_resolves_through_a_fresh_converter_and_is_cached(tmp_path):
    ref = JsonConverter(large=LargePayloads(LocalArchiveStore(tmp_path))).to_bytes([BIG, 2])
    store = CountingStore(tmp_path)
    reader = JsonConverter(large=LargePayloads(store))
    assert reader.from_bytes(ref) == [BIG, 2]
    assert reader.from_bytes(ref) == [BIG, 2]
    assert store.gets == 1  # the second read came from the cache (a replay does not fetch again)


def test_the_codec_runs_before_the_store_so_the_store_holds_encoded_bytes(tmp_path):
    class Rot:  # a stand-in for an encrypting codec
        def encode(self, data):
            return base64.b64encode(data)

        def decode(self, data):
            return base64.b64decode(data)

    conv = JsonConverter(Rot(), large=LargePayloads(LocalArchiveStore(tmp_path)))
    ref = conv.to_bytes({"secret": BIG})
    (stored,) = [p for p in tmp_path.rglob("*.bin")]
    assert b"secret" not in stored.read_bytes()
    assert conv.from_bytes(ref) == {"secret": BIG}


def test_over_the_limit_nothing_is_written(tmp_path):
    store = CountingStore(tmp_path)
    conv = JsonConverter(large=LargePayloads(store, limit=100_000))
    with pytest.raises(PayloadTooLargeError, match="over the payload limit of 100000 bytes") as info:
        conv.to_bytes(BIG)
    assert info.value.size == len(BIG) + 2 and info.value.limit == 100_000
    assert store.puts == 0 and list(tmp_path.iterdir()) == []


def test_without_a_store_payloads_stay_inline_and_a_reference_names_the_setting(tmp_path):
    conv = JsonConverter()
    assert conv.to_bytes(BIG) == f'"{BIG}"'.encode()
    ref = JsonConverter(large=LargePayloads(LocalArchiveStore(tmp_path))).to_bytes(BIG)
    with pytest.raises(SchemaError, match="no payload store is configured here .*KADENCE_PAYLOAD_DIR"):
        conv.from_bytes(ref)


def test_a_missing_or_altered_object_is_a_schema_error_naming_it(tmp_path):
    ref = JsonConverter(large=LargePayloads(LocalArchiveStore(tmp_path))).to_bytes(BIG)
    (path,) = list(tmp_path.rglob("*.bin"))
    path.write_bytes(path.read_bytes().replace(b"x", b"y", 1))
    with pytest.raises(SchemaError, match="does not match its reference's hash"):
        JsonConverter(large=LargePayloads(LocalArchiveStore(tmp_path))).from_bytes(ref)
    path.unlink()
    with pytest.raises(SchemaError, match="is missing from the payload store"):
        JsonConverter(large=LargePayloads(LocalArchiveStore(tmp_path))).from_bytes(ref)
    with pytest.raises(SchemaError, match="malformed"):
        JsonConverter(large=LargePayloads(LocalArchiveStore(tmp_path))).from_bytes(MARKER + b"zz 12")


def test_references_are_found_inside_a_whole_record(tmp_path):
    a = JsonConverter(large=LargePayloads(LocalArchiveStore(tmp_path))).to_bytes(BIG)
    b = JsonConverter(large=LargePayloads(LocalArchiveStore(tmp_path))).to_bytes(BIG + "y")
    blob = b"K\x07\x02" + a + b"\x10other fields" + b + MARKER + b"not-a-hash"
    assert list(references_in(blob)) == [
        a[len(MARKER) : len(MARKER) + 64].decode(),
        b[len(MARKER) : len(MARKER) + 64].decode(),
    ]
    assert list(references_in(b'{"plain": "json"}')) == []


def test_config_from_the_environment(tmp_path):
    assert LargePayloadConfig.from_env({}) == LargePayloadConfig()
    assert open_large_payloads(LargePayloadConfig.from_env({})).store is None
    cfg = LargePayloadConfig.from_env(
        {"KADENCE_PAYLOAD_DIR": str(tmp_path), "KADENCE_PAYLOAD_THRESHOLD": "64KiB", "KADENCE_PAYLOAD_LIMIT": "5m"}
    )
    assert cfg == LargePayloadConfig(
        store=ArchiveStoreConfig(directory=str(tmp_path)), threshold=64 * 1024, limit=5 * 1024 * 1024
    )
    opened = open_large_payloads(cfg)
    assert isinstance(opened.store, LocalArchiveStore) and opened.threshold == 65536
    s3 = LargePayloadConfig.from_env({"KADENCE_PAYLOAD_S3_BUCKET": "b", "KADENCE_PAYLOAD_S3_PREFIX": "p"})
    assert s3.store.s3_bucket == "b" and s3.store.s3_prefix == "p"
    with pytest.raises(ConfigError, match="KADENCE_PAYLOAD_LIMIT=.lots.: a size in bytes"):
        LargePayloadConfig.from_env({"KADENCE_PAYLOAD_LIMIT": "lots"})


async def test_a_5_mb_payload_through_start_activity_signal_and_result_without_a_broker(tmp_path):
    store = CountingStore(tmp_path)
    async with WorkflowEnvironment(
        workflows=[BigMover], activities=[reverse], large_payloads=LargePayloads(store)
    ) as env:
        handle = await env.client.start_workflow(BigMover, FIVE_MB, id="big-1", task_queue="q")
        await handle.signal("more", OTHER_FIVE_MB)
        assert await asyncio.wait_for(handle.result(), 30) == [True, len(FIVE_MB), OTHER_FIVE_MB]
        raw = await handle.history(raw=True)
        decoded = await handle.history()
    # the start's input and the activity's (the same bytes: one object), the activity's result,
    # the signal, the workflow's result: the history holds references only
    assert len(store.list("payloads/", suffix=".bin")) == 4
    payloads = [v for e in raw for v in e["attributes"][1].values() if isinstance(v, bytes)]
    assert payloads and all(len(p) < 200 for p in payloads)
    assert sum(is_reference(p) for p in payloads) >= 5
    assert decoded[0]["attributes"]["input"] == [FIVE_MB]


def test_the_guides_example_runs_without_a_broker():
    stdout = run_example("large_payloads.py")
    assert "words: 880000, document back intact: True" in stdout
    assert "the start event's input is 95 bytes" in stdout
    assert "objects in the store: 2" in stdout


@activity.defn
async def too_big() -> str:
    return "z" * 2_000_000


@workflow.defn
class TooBig:
    @workflow.run
    async def run(self) -> str:
        try:
            return await workflow.execute_activity(too_big, start_to_close_timeout=T)
        except Exception as exc:  # noqa: BLE001 - what the workflow sees
            return f"{type(exc).__name__}: {type(exc.__cause__).__name__} {getattr(exc.__cause__, 'type', None)}"


async def test_an_activity_result_over_the_limit_fails_without_a_retry(tmp_path):
    store = CountingStore(tmp_path)
    async with WorkflowEnvironment(
        workflows=[TooBig], activities=[too_big], large_payloads=LargePayloads(store, limit=1_000_000)
    ) as env:
        out = await asyncio.wait_for(env.client.execute_workflow(TooBig, id="tb", task_queue="q"), 30)
        history = await env.client.get_workflow_handle("tb").history()
    assert out == "ActivityError: ApplicationError PayloadTooLargeError"
    types = [e["type"] for e in history]
    assert types.count("ActivityTaskFailed") == 1 and "ActivityTaskAttemptFailed" not in types  # no retry
    assert store.puts == 0


def test_an_s3_payload_store_round_trips_and_is_swept(tmp_path):
    """The S3 backend (moto's server on loopback): offload, resolve through a fresh reader, and
    the sweep's listing, age and delete (no namespace given: nothing is referenced)."""
    import socket

    import boto3
    from moto.server import ThreadedMotoServer

    from kadence.connectors.payload_gc import collect_payloads
    from kadence.storage import S3ArchiveStore
    from kadence.topics.config import KafkaConfig

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        s3 = boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{port}",
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        s3.create_bucket(Bucket="payloads")
        store = S3ArchiveStore("payloads", prefix="prod", client=s3)
        ref = JsonConverter(large=LargePayloads(store)).to_bytes(BIG)
        assert (
            JsonConverter(large=LargePayloads(S3ArchiveStore("payloads", prefix="prod", client=s3))).from_bytes(ref)
            == BIG
        )
        (key,) = store.list("payloads/", suffix=".bin")
        assert store.modified(key) is not None and store.modified("payloads/no/such.bin") is None
        young = collect_payloads(KafkaConfig(), store, namespaces=[], grace_s=3600)
        assert young.deleted == [] and young.young == 1
        assert collect_payloads(KafkaConfig(), store, namespaces=[], grace_s=0).deleted == [key]
        assert store.list("payloads/", suffix=".bin") == []
    finally:
        server.stop()


def test_the_gateway_answers_503_when_the_payload_store_fails_and_sends_nothing(tmp_path):
    from fastapi.testclient import TestClient

    from kadence.gateway import GatewayConfig, create_app
    from kadence.topics import KafkaConfig

    class NoEngine:  # the start must fail before it reaches the engine
        async def request(self, *a, **kw):
            raise AssertionError("a start whose payload could not be stored reached the engine")

    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the store's directory should be")
    large = LargePayloadConfig(store=ArchiveStoreConfig(directory=str(blocked)), threshold=1024)
    app = create_app(GatewayConfig(kafka=KafkaConfig(), auth=False, large_payloads=large), engine=NoEngine())
    with TestClient(app) as http:
        resp = http.post("/v1/workflows/Big/start", json={"workflow_id": "big", "task_queue": "q", "input": [BIG]})
    assert resp.status_code == 503 and resp.json()["error"]["code"] == "unavailable", resp.text
    assert resp.headers["Retry-After"].isdigit() and "could not be stored" in resp.json()["error"]["message"]
