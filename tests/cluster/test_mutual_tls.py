"""Mutual TLS to Kafka (issue 43): a client that authenticates with a certificate signed by the
cluster's CA (principal ``User:CN=<name>``), granted its ACLs with ``kadence acls``, runs a
workflow through a processor and a worker; a client with an expired certificate, or none, is
told that the brokers refused its certificate, not that they are down."""

from __future__ import annotations

import dataclasses
import datetime
import os
import subprocess
import sys

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from kadence import Client, KafkaAuthenticationError, Worker
from kadence.samples import hello_mtls
from kadence.topics import KafkaConfig
from tests.integration.workflows import ThreeSteps, add, double, three_steps_result

from .conftest import PARTITIONS, log_tail, run_kadence

NS = "mtls"
QUEUE = "mtls-q"


def _expired_certificate(cluster, directory) -> tuple[str, str]:
    """A key and a certificate signed by the cluster's CA whose validity ended yesterday."""
    tls = cluster.tls.dir
    ca_key = serialization.load_pem_private_key((tls / "ca.key").read_bytes(), None)
    ca = x509.load_pem_x509_certificate((tls / "ca.crt").read_bytes())
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "expired-client")]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=10))
        .not_valid_after(now - datetime.timedelta(days=1))
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    key_path, cert_path = directory / "expired.key", directory / "expired.crt"
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(key_path), str(cert_path)


async def test_a_client_certificate_is_the_principal_and_runs_a_workflow(cluster, tmp_path):
    key, cert = cluster.tls.issue("orders-mtls")
    env = {**os.environ, **cluster.mtls_env(cert, key), "KADENCE_NAMESPACE": NS, "KADENCE_PARTITIONS": str(PARTITIONS)}
    admin = {**os.environ, **cluster.client_env("admin"), "KADENCE_NAMESPACE": NS}
    code, out, _ = run_kadence(
        ["acls", "admin", "processor", "worker", "client", "--principal", "User:CN=orders-mtls", "--apply"], admin
    )
    assert code == 0, out
    code, out, _ = run_kadence(["topics", "apply"], env)
    assert code == 0, out
    log = tmp_path / "processor.log"
    processor = subprocess.Popen(
        [sys.executable, "-m", "kadence.cli", "processor", "--instance-id", "mtls-p0"],
        env=env,
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
    )
    try:
        client = await Client.connect(config=KafkaConfig.from_env(env), wait_for_broker=60)
        try:
            async with Worker(client, task_queue=QUEUE, workflows=[ThreeSteps], activities=[add, double]):
                result = await client.execute_workflow(ThreeSteps.run, 4, id="mtls-1", task_queue=QUEUE)
        finally:
            await client.close()
        assert result == three_steps_result(4), log_tail(log)
        # the hello_mtls sample, with the config it builds (issue 44: a sample per concept)
        config = hello_mtls.mtls_config(
            cluster.mtls_bootstrap, ca=str(cluster.tls.ca_cert), cert=str(cert), key=str(key), namespace=NS
        )
        config = dataclasses.replace(config, partitions=PARTITIONS, replication=cluster.replication)
        client = await Client.connect(config=config, wait_for_broker=60)
        try:
            assert await hello_mtls.main(client, workflow_id="mtls-sample", task_queue=QUEUE) == "Hello, mTLS!", (
                log_tail(log)
            )
        finally:
            await client.close()
        assert processor.poll() is None, log_tail(log)
    finally:
        processor.terminate()
        try:
            processor.wait(20)
        except subprocess.TimeoutExpired:
            processor.kill()


@pytest.mark.parametrize("certificate", ["expired", "none"])
async def test_a_client_without_a_valid_certificate_is_told_so(cluster, tmp_path, certificate):
    env = {
        "KADENCE_KAFKA_BOOTSTRAP": cluster.mtls_bootstrap,
        "KADENCE_KAFKA_SECURITY_PROTOCOL": "SSL",
        "KADENCE_KAFKA_SSL_CA": str(cluster.tls.ca_cert),
        "KADENCE_NAMESPACE": NS,
    }
    if certificate == "expired":
        key, cert = _expired_certificate(cluster, tmp_path)
        env.update(KADENCE_KAFKA_SSL_CERT=cert, KADENCE_KAFKA_SSL_KEY=key)
    with pytest.raises(KafkaAuthenticationError, match="refused this client's TLS certificate"):
        await Client.connect(config=KafkaConfig.from_env(env), wait_for_broker=60)
