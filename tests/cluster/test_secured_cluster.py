"""Kadence on a secured, replicated cluster (issue 43): three KRaft nodes, SASL_SSL with
SCRAM-SHA-512 and a throw-away CA, ACLs on the namespace's prefix. What a Kafka team gets on MSK,
Confluent Cloud or Strimzi: everything works as the ACL'd user, and a wrong password, an
untrusted CA or a missing ACL is a clear error that says what to fix, from every component."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from kadence import Client, KafkaAuthenticationError, KafkaAuthorizationError
from kadence.topics import Catalogue, KafkaConfig

from .conftest import NAMESPACE, cluster_env, free_port, run_kadence, stop_all

WRONG = {"KADENCE_KAFKA_SASL_PASSWORD": "not-the-password"}


def _redis() -> dict[str, str]:
    url = os.environ.get("KADENCE_REDIS_URL")
    assert url, "KADENCE_REDIS_URL is not set: run the tests with scripts/devstack.py"
    return {"KADENCE_REDIS_URL": url}


def test_created_topics_are_replicated_three_times_with_two_in_sync(cluster, app_config):
    admin = AdminClient({k: v for k, v in KafkaConfig.from_env(cluster_env(cluster, "admin")).base().items()})
    topics = Catalogue(app_config)
    md = admin.list_topics(topics.history, timeout=10).topics[topics.history]
    assert {len(p.replicas) for p in md.partitions.values()} == {3}
    resource = ConfigResource(ConfigResource.Type.TOPIC, topics.commands)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["min.insync.replicas"].value == "2"


def test_a_wrong_password_is_said_to_be_one_by_the_cli_the_processor_and_the_projections(cluster, app_config):
    env = cluster_env(cluster, **WRONG, **_redis())
    code, out, took = run_kadence(["topics", "apply"], env)
    assert code == 1, out
    assert "refused to authenticate user 'app'" in out and "KADENCE_KAFKA_SASL_PASSWORD" in out, out
    assert "Traceback" not in out and "not-the-password" not in out
    assert took < 30, f"took {took:.1f} s"  # a guard against waiting for an outage, not a target

    code, out, _ = run_kadence(["processor", "--instance-id", "p-wrong"], env)
    assert code == 1 and "refused to authenticate user 'app'" in out, out
    assert "Traceback" not in out

    # exits 78 (a setting to fix) and its supervisor does not start it again
    code, out, _ = run_kadence(["projections", "run"], env, timeout=120)
    assert code == 78, out
    assert "refused to authenticate user 'app'" in out and out.count("exited with status 78") == 1, out


async def test_the_sdk_raises_the_refusal_at_once_instead_of_waiting_for_the_broker(cluster, app_config):
    config = KafkaConfig.from_env(cluster_env(cluster, **WRONG))
    started = time.monotonic()
    with pytest.raises(KafkaAuthenticationError, match="refused to authenticate user 'app'"):
        await Client.connect(config=config, wait_for_broker=120)  # would wait 2 minutes for an outage
    assert time.monotonic() - started < 60


async def test_a_client_that_trusts_another_ca_is_told_to_check_its_ca(cluster, app_config):
    env = cluster_env(cluster, KADENCE_KAFKA_SSL_CA=str(cluster.tls.other_ca))
    code, out, _ = run_kadence(["topics", "apply"], env)
    assert code == 1 and "TLS handshake" in out and "KADENCE_KAFKA_SSL_CA" in out, out
    with pytest.raises(KafkaAuthenticationError, match="TLS handshake"):
        await Client.connect(config=KafkaConfig.from_env(env))


async def test_a_principal_without_acls_is_told_which_acl_to_grant(cluster, app_config):
    env = cluster_env(cluster, "stranger")
    code, out, _ = run_kadence(["processor", "--instance-id", "p-stranger"], env)
    assert code == 1, out
    assert f"user 'stranger' is not authorized for topic {NAMESPACE}." in out, out
    assert f"grant it DESCRIBE, READ and WRITE on topics with the prefix '{NAMESPACE}.'" in out, out
    assert "run `kadence topics apply`" not in out

    code, out, _ = run_kadence(["topics", "apply"], env)
    assert code == 1 and "may not create topic" in out and "grant it CREATE" in out, out

    with pytest.raises(KafkaAuthorizationError, match="user 'stranger' is not authorized for topic"):
        await Client.connect(config=KafkaConfig.from_env(env))


def test_the_gateways_readiness_names_the_refusal(cluster, app_config, tmp_path):
    port = free_port()
    log = open(tmp_path / "gateway.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kadence.cli", "gateway", "--no-auth", "--port", str(port)],
        env=cluster_env(cluster, **WRONG),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline, body, status = time.monotonic() + 60, None, None
        while time.monotonic() < deadline and body is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=30) as resp:
                    status, body = resp.status, json.loads(resp.read())
            except urllib.error.HTTPError as exc:
                status, body = exc.code, json.loads(exc.read())
            except OSError:
                time.sleep(0.3)
        assert status == 503, (status, body, (tmp_path / "gateway.log").read_text()[-3000:])
        assert "refused to authenticate user 'app'" in body["checks"]["kafka"], body
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/workflows/OrderFulfilment/start",
            data=json.dumps({"workflow_id": "wf-1", "task_queue": "orders", "input": [{}]}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=60)
        error = json.loads(refused.value.read())["error"]
        assert refused.value.code == 503 and "refused to authenticate user 'app'" in error["message"], error
    finally:
        stop_all([proc])


def test_a_bridge_starts_workflows_from_a_domain_topic_over_sasl_ssl(cluster, app_config, tmp_path):
    """``kadence bridges run`` as ``app``: records of a domain topic become starts, once each,
    on the secured cluster (the domain topic lies under the namespace's prefix here, so the
    namespace's ACLs cover reading it; docs/deploy.md: a bridge also needs READ on its topics)."""
    from confluent_kafka import Producer

    from kadence.topics import TopicSpec
    from kadence.topics.history_reader import read_runs

    domain = f"{NAMESPACE}.domain.orders-created"
    Catalogue(app_config).apply([TopicSpec(domain, 2)])
    producer = Producer(app_config.producer())
    for i in range(20):
        producer.produce(domain, json.dumps({"order_id": i}).encode(), str(i).encode())
    assert producer.flush(30) == 0
    path = tmp_path / "bridge.toml"
    path.write_text(
        f'[bridge]\nname = "secured"\n\n[[mappings]]\ntopic = "{domain}"\naction = "start"\n'
        'workflow_type = "FulfilOrder"\ntask_queue = "orders"\nworkflow_id_field = "order_id"\n'
        'workflow_id_prefix = "bridged-"\n'
    )
    env = cluster_env(cluster)
    log = tmp_path / "bridge.log"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "kadence.cli", *args], env=env, stdout=open(log, "a"), stderr=subprocess.STDOUT
        )
        for args in (["bridges", "run", "--config", str(path)], ["processor", "--instance-id", "bridge-p0"])
    ]
    try:
        deadline, started = time.monotonic() + 120, set()
        while time.monotonic() < deadline:
            runs = read_runs(app_config, closed_only=False)
            started = {
                events[0]["aggregate_key"] for events in runs if events[0]["aggregate_key"].startswith("bridged-")
            }
            if len(started) == 20:
                break
            time.sleep(1)
        assert started == {f"bridged-{i}" for i in range(20)}, log.read_text()[-4000:]
        assert all(p.poll() is None for p in procs), log.read_text()[-4000:]
    finally:
        stop_all(procs)
