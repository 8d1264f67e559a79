"""``KADENCE_KAFKA_SERVER_PROPS``: extra server.properties entries for the dev broker."""

from __future__ import annotations

import pytest

from kadence.devstack import cluster as devcluster
from kadence.devstack import services as devstack


def test_overrides_are_read_as_key_value_pairs():
    env = {"KADENCE_KAFKA_SERVER_PROPS": "transaction.partition.verification.enable=false, num.io.threads=4"}
    assert devstack.server_overrides(env) == {
        "transaction.partition.verification.enable": "false",
        "num.io.threads": "4",
    }
    assert devstack.server_overrides({}) == {}


@pytest.mark.parametrize("raw", ["no-equals-sign", "=value"])
def test_a_malformed_override_stops_with_the_reason(raw):
    with pytest.raises(SystemExit, match="KADENCE_KAFKA_SERVER_PROPS"):
        devstack.server_overrides({"KADENCE_KAFKA_SERVER_PROPS": raw})


def test_overrides_win_over_the_defaults_in_server_properties(tmp_path):
    broker = devstack.KafkaBroker(config={"num.io.threads": 4})
    broker.port, broker.controller_port = 1, 2
    broker._write_config(tmp_path)
    lines = (tmp_path / "server.properties").read_text().splitlines()
    assert "num.io.threads=4" in lines and "num.io.threads=2" not in lines


def test_a_secured_clusters_nodes_share_one_quorum_and_replicate_as_production_does(tmp_path):
    cluster = devcluster.KafkaCluster(3, secure=True, workdir=tmp_path, users={"app": "pw"})
    node = cluster.nodes[1]
    node._ensure_workdir().mkdir(parents=True)
    node._write_config(node.workdir)
    props = dict(line.split("=", 1) for line in (node.workdir / "server.properties").read_text().splitlines())
    assert props["node.id"] == "2"
    assert props["controller.quorum.voters"].count("@127.0.0.1:") == 3
    assert props["offsets.topic.replication.factor"] == "3" and props["transaction.state.log.min.isr"] == "2"
    assert props["min.insync.replicas"] == "2" and props["default.replication.factor"] == "3"
    assert props["listeners"].startswith("SASL_SSL://") and props["allow.everyone.if.no.acl.found"] == "false"
    assert props["listener.name.controller.ssl.client.auth"] == "required"
    # the users are made when the storage is formatted; the super user's password is random
    args = cluster.format_args()
    assert "SCRAM-SHA-512=[name=app,password=pw]" in args and len(cluster.admin_password) >= 16
    env = cluster.client_env("app")
    assert env["KADENCE_KAFKA_SASL_USERNAME"] == "app" and env["KADENCE_REPLICATION"] == "3"


@pytest.mark.parametrize(
    ("env", "wanted"),
    [({}, False), ({"KADENCE_KAFKA_BROKERS": "3"}, True), ({"KADENCE_KAFKA_SECURITY": "SASL_SSL"}, True)],
)
def test_the_stack_starts_a_cluster_when_asked(env, wanted):
    assert devcluster.cluster_wanted(env) is wanted


@pytest.mark.parametrize("env", [{"KADENCE_KAFKA_BROKERS": "three"}, {"KADENCE_KAFKA_SECURITY": "kerberos"}])
def test_a_bad_cluster_setting_stops_the_stack_with_the_reason(env):
    with pytest.raises(devstack.StackError, match="KADENCE_KAFKA_"):
        devcluster.cluster_wanted(env)
