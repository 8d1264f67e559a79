"""Several `kadence gateway` processes behind one address: the same start sent 20 times at once with one
Idempotency-Key to two instances is one workflow and 20 identical answers; the answer survives a
gateway restart; a reused key with another body is refused by an instance that never saw it. Also
TLS termination and the CLI's auth switches."""

from __future__ import annotations

import asyncio
import os
import signal
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from kadence.topics import KafkaConfig

from .gateway_support import auth, commands_for, devstack, make_key, redis_url


class GatewayProc:
    """A `kadence gateway` child process on a free loopback port."""

    def __init__(self, config: KafkaConfig, logdir: Path, name: str, *args: str, env: dict | None = None):
        self.port = devstack().free_port()
        self.log = logdir / f"gateway-{name}.log"
        self.scheme = "https" if "--tls-cert" in args else "http"
        environ = {
            **os.environ,
            "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap,
            "KADENCE_NAMESPACE": config.namespace,
            **(env or {}),
        }
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kadence.cli", "gateway", "--port", str(self.port), *args],
                env=environ,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def wait_ready(self, verify=True, timeout: float = 90) -> GatewayProc:
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, f"the gateway exited:\n{self.log.read_text()[-3000:]}"
            try:
                if httpx.get(f"{self.url}/readyz", timeout=3, verify=verify).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"the gateway did not get ready:\n{self.log.read_text()[-3000:]}"
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def gateways(gw_config, engine, tmp_path):
    started: list[GatewayProc] = []

    def start(name: str, *args: str, env: dict | None = None) -> GatewayProc:
        g = GatewayProc(gw_config, tmp_path, name, *args, env={"KADENCE_REDIS_URL": redis_url(), **(env or {})})
        started.append(g)
        return g

    yield start
    for g in started:
        g.stop()


async def test_twenty_concurrent_retries_on_two_instances_are_one_workflow_and_one_answer(gateways, gw_config):
    one, two = gateways("one"), gateways("two")
    one.wait_ready(), two.wait_ready()
    key = make_key(gw_config.namespace)
    idem = f"order-{uuid.uuid4().hex[:8]}"
    body = {"task_queue": "q", "input": [7]}  # no workflow_id: derived from the key, so a retry is the same
    headers = {**auth(key), "Idempotency-Key": idem}
    async with (
        httpx.AsyncClient(base_url=one.url, timeout=60) as a,
        httpx.AsyncClient(base_url=two.url, timeout=60) as b,
    ):
        responses = await asyncio.gather(
            *((a if i % 2 else b).post("/v1/workflows/Collector/start", json=body, headers=headers) for i in range(20))
        )
        assert [r.status_code for r in responses] == [201] * 20, [r.text for r in responses]
        assert len({r.content for r in responses}) == 1, "the 20 answers differ"
        wid, run_id = responses[0].json()["workflow_id"], responses[0].json()["run_id"]
        hist = (await a.get(f"/v1/workflows/{wid}/history", headers=auth(key))).json()
        assert hist["run_id"] == run_id
        assert [e["type"] for e in hist["events"]].count("WorkflowExecutionStarted") == 1

    # a restart loses nothing: a third instance (after the first stopped) answers the retry the same way
    one.stop()
    three = gateways("three").wait_ready()
    async with httpx.AsyncClient(base_url=three.url, timeout=60) as c:
        retry = await c.post("/v1/workflows/Collector/start", json=body, headers=headers)
        assert (retry.status_code, retry.content) == (201, responses[0].content)
        reused = await c.post("/v1/workflows/Collector/start", json={**body, "input": [8]}, headers=headers)
        assert reused.status_code == 422 and reused.json()["error"]["code"] == "idempotency_key_reused"
    starts = [c for c in commands_for(gw_config, wid) if c != "AwaitWorkflowResult"]  # the history read's
    assert starts == ["StartWorkflow"] * 21, f"expected the 21 accepted sends as commands, got {starts}"


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_tls_termination_and_the_no_auth_switch(gateways, gw_config, tmp_path):
    cert, key = _self_signed(tmp_path)
    g = gateways("tls", "--no-auth", "--tls-cert", str(cert), "--tls-key", str(key))
    trust = ssl.create_default_context(cafile=str(cert))
    g.wait_ready(verify=trust)
    async with httpx.AsyncClient(base_url=g.url, timeout=30, verify=trust) as https:
        wid = f"tls-{uuid.uuid4().hex[:8]}"
        started = await https.post("/v1/workflows/Collector/start", json={"workflow_id": wid, "task_queue": "q"})
        assert started.status_code == 201, started.text
    with pytest.raises(httpx.TransportError):  # plain HTTP is not served on the TLS port
        httpx.get(f"http://127.0.0.1:{g.port}/healthz", timeout=5)
    with pytest.raises(httpx.TransportError):  # and the certificate is checked
        httpx.get(f"{g.url}/healthz", timeout=5)
    assert "WITHOUT authentication" in g.log.read_text()


def test_auth_is_on_by_default_and_needs_redis(gw_config, tmp_path):
    env = {**os.environ, "KADENCE_KAFKA_BOOTSTRAP": gw_config.bootstrap, "KADENCE_NAMESPACE": gw_config.namespace}
    env.pop("KADENCE_REDIS_URL", None)
    out = subprocess.run(
        [sys.executable, "-m", "kadence.cli", "gateway", "--port", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "KADENCE_REDIS_URL" in out.stderr and "--no-auth" in out.stderr
    half = subprocess.run(
        [sys.executable, "-m", "kadence.cli", "gateway", "--no-auth", "--tls-cert", __file__],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert half.returncode == 2 and "--tls-key" in half.stderr


async def test_mutual_tls_turns_away_a_client_without_a_certificate_from_its_ca(gateways, tmp_path):
    """``--tls-client-ca``: a client certificate signed by that CA is required; one from another
    CA, or none, fails the handshake."""
    from kadence.devstack.cluster import TlsMaterial

    tls = TlsMaterial(tmp_path / "tls").make()
    client_key, client_cert = tls.issue("gateway-client")
    server = tls.broker_pem  # a certificate for 127.0.0.1 signed by the same throw-away CA
    server_key, server_cert = tls.dir / f"{TlsMaterial.BROKER_CN}.key", tls.dir / f"{TlsMaterial.BROKER_CN}.crt"
    assert server.exists()
    g = gateways(
        "mtls", "--no-auth", "--tls-cert", str(server_cert), "--tls-key", str(server_key),
        "--tls-client-ca", str(tls.ca_cert),
    )  # fmt: skip
    trusted = ssl.create_default_context(cafile=str(tls.ca_cert))
    trusted.load_cert_chain(str(client_cert), str(client_key))
    g.wait_ready(verify=trusted)
    async with httpx.AsyncClient(base_url=g.url, timeout=30, verify=trusted) as https:
        assert (await https.get("/healthz")).status_code == 200
    anonymous = ssl.create_default_context(cafile=str(tls.ca_cert))
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{g.url}/healthz", timeout=5, verify=anonymous)
    other = TlsMaterial(tmp_path / "other").make()
    other_key, other_cert = other.issue("stranger")
    stranger = ssl.create_default_context(cafile=str(tls.ca_cert))
    stranger.load_cert_chain(str(other_cert), str(other_key))
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{g.url}/healthz", timeout=5, verify=stranger)
