"""Payload codecs end to end on the real broker: `kadence --codec` for the worker and the CLI, the
gateway's KADENCE_CODEC, and a worker without the codec: its workflow task fails with the cause
named (describe shows it) and the run waits for a worker that has it, instead of failing."""

import asyncio
import json
import os
import sys

import pytest

from kadence import Client, WorkflowTaskFailedError
from kadence.topics import ConfigError, JsonConverter, SchemaError
from kadence.topics.payload import load_codec
from tests.support.cli import kadence

from .codec_support import MARK, Sealed
from .conftest import wait_until
from .workflows import Collector

CODEC = "tests.integration.codec_support:Sealed"


def _worker(config, *codec):
    return asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kadence.cli",
        "--log-level",
        "warning",
        "--bootstrap",
        config.bootstrap,
        "--namespace",
        config.namespace,
        *codec,
        "worker",
        "--task-queue",
        "sealed",
        "--module",
        "tests.integration.codec_support",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ},
    )


async def _stop(proc) -> None:
    proc.terminate()
    await asyncio.wait_for(proc.wait(), 30)


async def test_a_worker_without_the_codec_names_the_cause_and_one_with_it_finishes_the_run(processors, kafka_config):
    processors.start()
    sealed = await Client.connect(config=kafka_config, codec=Sealed())
    try:
        handle = await sealed.start_workflow(Collector, 1, id="sealed-1", task_queue="sealed")
        plain = await _worker(kafka_config)  # no codec: cannot read the sealed input
        try:

            async def stuck():
                d = await handle.describe()
                return d["last_task_failure"] is not None and d

            described = await wait_until(stuck, 60, "the workflow task to fail on the sealed input")
            # a result that does not come names the cause instead of "no reply"
            with pytest.raises(WorkflowTaskFailedError, match="keeps failing.*needs the same codec"):
                await handle.result(timeout=3)
        finally:
            await _stop(plain)
        failure = described["last_task_failure"]
        assert described["status"] == "running" and "not valid JSON" in failure["message"]
        assert "needs the same codec" in failure["message"]
        worker = await _worker(kafka_config, "--codec", CODEC)
        try:
            await handle.signal("add", "x")
            assert await handle.result(timeout=90) == ["x"]
        finally:
            await _stop(worker)
        events = await handle.history(raw=True)
        started = next(e["attributes"][1] for e in events if e["attributes"][0] == "WorkflowExecutionStarted")
        assert started["input"].startswith(MARK)  # sealed in the log
        rc, out, err = await kadence(kafka_config, "--codec", CODEC, "history", "sealed-1")
        assert rc == 0, err
        shown = json.loads(out)
        assert shown[0]["attributes"]["input"] == [1]  # the CLI shows it decoded
        rc, out, err = await kadence(kafka_config, "history", "sealed-1")
        assert rc == 0 and "base64" in json.loads(out)[0]["attributes"]["input"]  # without: as bytes
    finally:
        await sealed.close()


async def test_a_bad_codec_name_stops_the_command_with_the_reason(kafka_config):
    rc, _out, err = await kadence(kafka_config, "--codec", "tests.integration.codec_support:nope", "describe", "x")
    assert rc == 2 and "codec 'tests.integration.codec_support:nope' not found" in err


def test_load_codec_checks_what_it_is_given():
    assert isinstance(load_codec(CODEC), Sealed)
    for spec, message in (
        ("no-colon", "module:factory"),
        ("nosuch.module:x", "not found"),
        ("tests.integration.codec_support:broken", "no key configured"),
        ("json:dumps", "failed"),
        ("tests.integration.codec_support:MARK", "failed"),
    ):
        with pytest.raises(ConfigError, match=message):
            load_codec(spec)


def test_a_payload_sealed_with_another_codec_says_so():
    class Other:
        def encode(self, data):
            return data

        def decode(self, data):
            raise ValueError("bad tag")

    data = JsonConverter(Sealed()).to_bytes([1])
    with pytest.raises(SchemaError, match="codec Other could not decode a payload .ValueError.: was it written"):
        JsonConverter(Other()).from_bytes(data)


def test_the_gateway_takes_its_codec_from_the_environment():
    from kadence.gateway import GatewayConfig
    from kadence.topics import KafkaConfig

    config = GatewayConfig.from_env(KafkaConfig(), {"KADENCE_CODEC": CODEC}, auth=False)
    assert isinstance(config.codec, Sealed)
    with pytest.raises(ConfigError, match="not found"):
        GatewayConfig.from_env(KafkaConfig(), {"KADENCE_CODEC": "tests.integration.codec_support:nope"}, auth=False)


def test_the_gateways_decode_endpoint_shows_values_through_its_codec_and_says_what_it_cannot():
    import base64

    from fastapi.testclient import TestClient

    from kadence.gateway import GatewayConfig, create_app
    from kadence.topics import KafkaConfig

    class NoEngine:  # the endpoint asks the engine nothing
        async def request(self, *a, **kw):
            raise AssertionError("the decode endpoint must not reach the engine")

    sealed = JsonConverter(Sealed()).to_bytes({"card": "4111", "amount": 12})
    plain = JsonConverter().to_bytes([1, 2])
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    app = create_app(GatewayConfig(kafka=KafkaConfig(), auth=False, codec=Sealed()), engine=NoEngine())
    with TestClient(app) as http:
        resp = http.post("/v1/codec/decode", json={"payloads": [b64(sealed), b64(plain), "%%%"]})
        assert resp.status_code == 200, resp.text
        got = resp.json()
        assert got["codec"] == "Sealed" and got["payloads"][0] == {"value": {"card": "4111", "amount": 12}}
        assert "could not decode" in got["payloads"][1]["error"] and got["payloads"][2] == {"error": "not base64"}
        assert "[1,2]" not in resp.text  # an undecodable payload is not echoed
        assert http.post("/v1/codec/decode", json={"payloads": []}).status_code == 400  # the error shape
        assert http.post("/v1/codec/decode", json={"payloads": ["AA=="] * 101}).status_code == 400


async def test_a_command_that_shows_no_payload_does_not_load_the_codec(kafka_config):
    """KADENCE_CODEC may sit in a shared environment: a processor, a timer service or
    `topics describe` never import the application's codec module."""
    rc, _out, err = await kadence(kafka_config, "--codec", "tests.integration.codec_support:nope", "topics", "describe")
    assert rc == 0 and "codec" not in err, err
