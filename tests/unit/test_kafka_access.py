"""Refusals told from outages (``kadence.topics.kafka_access``): the error callback every Kafka
client gets remembers an authentication or TLS failure and logs each kind once a minute; a
broker's authorization failure is worded as the ACL to grant; bad TLS/SASL settings are refused
before any client tries them."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError, KafkaException

from kadence.topics import ConfigError, KafkaAuthenticationError, KafkaAuthorizationError, KafkaConfig, kafka_access
from kadence.topics.kafka_access import ClientErrors, authorization_error, metadata, refusal_of

SASL = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "orders-svc",
    "sasl.password": "hunter2",
}


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _errors(caplog, clock=None):
    caplog.set_level(logging.DEBUG, logger="kadence.kafka")
    return ClientErrors(who="p0", bootstrap="b:9093", security=SASL, clock=clock or _Clock())


def test_an_authentication_failure_is_remembered_named_and_logged_without_the_password(caplog):
    errors = _errors(caplog)
    assert errors.refusal() is None
    errors(KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: invalid credentials"))
    refused = errors.refusal()
    assert isinstance(refused, KafkaAuthenticationError)
    assert "refused to authenticate user 'orders-svc'" in str(refused) and "KADENCE_KAFKA_SASL_PASSWORD" in str(refused)
    assert "hunter2" not in caplog.text and "hunter2" not in str(refused)
    assert [r.levelname for r in caplog.records] == ["ERROR"]


def test_a_tls_failure_points_at_the_ca_and_the_client_certificate(caplog):
    errors = _errors(caplog)
    errors(KafkaError(KafkaError._SSL, "SSL handshake failed: certificate verify failed"))
    assert "KADENCE_KAFKA_SSL_CA" in str(errors.refusal())


def test_a_tls_alert_from_the_broker_is_a_refused_client_certificate_not_an_outage(caplog):
    errors = _errors(caplog)
    errors(KafkaError(KafkaError._TRANSPORT, "Connect to ipv4#127.0.0.1:9093 failed: Connection refused"))
    assert errors.refusal() is None  # a broker that is down
    errors(
        KafkaError(
            KafkaError._TRANSPORT,
            "ssl://127.0.0.1:9093/bootstrap: Receive failed: error:0A000416:SSL routines::ssl/tls alert "
            "certificate unknown: SSL alert number 46",
        )
    )
    assert "refused this client's TLS certificate" in str(errors.refusal())
    assert "KADENCE_KAFKA_SSL_CERT" in str(errors.refusal())


def test_each_kind_of_error_is_logged_once_a_minute_with_how_many_were_left_out(caplog):
    clock = _Clock()
    errors = _errors(caplog, clock)
    for _ in range(15):  # librdkafka's rate for a wrong password: about fifteen a second
        errors(KafkaError(KafkaError._AUTHENTICATION, "bad password"))
        errors(KafkaError(KafkaError._TRANSPORT, "connection refused"))
        clock.now += 0.07
    assert len(caplog.records) == 2  # one per kind
    clock.now += 60
    errors(KafkaError(KafkaError._AUTHENTICATION, "bad password"))
    assert len(caplog.records) == 3
    assert "(14 more like it in the last 60 s)" in caplog.records[-1].getMessage()


def test_an_old_refusal_no_longer_explains_a_failure(caplog):
    clock = _Clock()
    errors = _errors(caplog, clock)
    errors(KafkaError(KafkaError._AUTHENTICATION, "bad password"))
    clock.now += 121
    assert errors.refusal() is None
    errors(KafkaError(KafkaError._TRANSPORT, "connection refused"))  # not a refusal
    assert errors.refusal() is None


def test_every_client_configuration_carries_its_own_callback():
    config = KafkaConfig.from_env({})
    a, b = config.producer()["error_cb"], config.consumer("g")["error_cb"]
    assert isinstance(a, ClientErrors) and isinstance(b, ClientErrors) and a is not b


class _Refusing:
    """A client whose metadata requests time out (after their whole timeout, on ``clock``, as
    librdkafka's do) while its connections fail to authenticate; or, ``fail_fast``, fail at once."""

    def __init__(self, conf, clock, refuse=True, fail_fast=False):
        self.conf, self.clock, self.refuse, self.fail_fast, self.asked = conf, clock, refuse, fail_fast, []

    def list_topics(self, topic=None, timeout=-1):
        self.asked.append(round(timeout, 2))
        if not self.fail_fast:
            self.clock.now += timeout
        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Failed to get metadata"))

    def poll(self, timeout=0):
        if self.refuse:
            self.conf["error_cb"](KafkaError(KafkaError._AUTHENTICATION, "bad password"))
        return 0


@pytest.fixture
def clock(monkeypatch):
    """``kadence.topics.kafka_access``'s monotonic clock, moved only by the fake clients."""
    fake = _Clock()
    monkeypatch.setattr(kafka_access.time, "monotonic", fake)
    return fake


def test_metadata_raises_a_refusal_after_its_first_short_step(clock):
    conf = KafkaConfig.from_env({}).base()
    client = _Refusing(conf, clock)
    with pytest.raises(KafkaAuthenticationError):
        metadata(client, conf, timeout=10)
    assert client.asked == [1.0]
    assert refusal_of(conf) is not None


def test_metadata_without_a_refusal_keeps_asking_in_doubling_steps_until_its_timeout(clock):
    conf = KafkaConfig.from_env({}).base()
    client = _Refusing(conf, clock, refuse=False)
    with pytest.raises(KafkaException):
        metadata(client, conf, timeout=10, step_s=1)
    assert client.asked == [1.0, 2.0, 4.0, 3.0]  # the last step is what is left of the 10 s


def test_metadata_that_fails_at_once_is_not_asked_again(clock):
    conf = KafkaConfig.from_env({}).base()
    client = _Refusing(conf, clock, refuse=False, fail_fast=True)
    with pytest.raises(KafkaException):
        metadata(client, conf, timeout=5, step_s=1)
    assert client.asked == [1.0]


@pytest.mark.parametrize(
    ("code", "grant"),
    [
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, "DESCRIBE, READ and WRITE on topics with the prefix 'orders.'"),
        (KafkaError.GROUP_AUTHORIZATION_FAILED, "on groups with the prefix 'orders.'"),
        (KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "on transactional IDs with the prefix 'orders.'"),
        (KafkaError.CLUSTER_AUTHORIZATION_FAILED, "IDEMPOTENT_WRITE on the cluster"),
    ],
)
def test_an_authorization_failure_names_the_principal_the_resource_and_the_grant(code, grant):
    err = authorization_error(KafkaError(code), resource="orders.commands", namespace="orders", security=SASL)
    assert isinstance(err, KafkaAuthorizationError)
    assert "user 'orders-svc'" in str(err) and "orders.commands" in str(err) and grant in str(err)
    assert authorization_error(KafkaError(KafkaError._TRANSPORT), resource="x", namespace="o", security=SASL) is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KADENCE_KAFKA_SECURITY_PROTOCOL": "TLS"}, "must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
        ({"KADENCE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KADENCE_KAFKA_SASL_MECHANISM": "MD5"}, "MECHANISM"),
        (
            {"KADENCE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KADENCE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512"},
            "needs KADENCE_KAFKA_SASL_USERNAME and KADENCE_KAFKA_SASL_PASSWORD",
        ),
        ({"KADENCE_KAFKA_SASL_USERNAME": "u", "KADENCE_KAFKA_SASL_PASSWORD": "p"}, "set it to SASL_SSL"),
        ({"KADENCE_KAFKA_SECURITY_PROTOCOL": "SSL", "KADENCE_KAFKA_SSL_CA": "/nonexistent/ca.crt"}, "no such file"),
        ({"KADENCE_KAFKA_SSL_CA": __file__}, "without TLS"),
        ({"KADENCE_KAFKA_SECURITY_PROTOCOL": "SSL", "KADENCE_KAFKA_SSL_CERT": __file__}, "needs both"),
        ({"KADENCE_REPLICATION": "3", "KADENCE_MIN_INSYNC_REPLICAS": "4"}, "between 1 and the replication factor 3"),
    ],
)
def test_settings_that_cannot_work_are_refused_at_start(env, message):
    with pytest.raises(ConfigError, match=message):
        KafkaConfig.from_env(env)


@pytest.mark.parametrize(
    ("replication", "setting", "expected"), [(1, 0, 1), (2, 0, 1), (3, 0, 2), (5, 0, 2), (3, 3, 3)]
)
def test_min_insync_replicas_defaults_to_two_on_a_replicated_namespace(replication, setting, expected):
    config = KafkaConfig.from_env(
        {"KADENCE_REPLICATION": str(replication), "KADENCE_MIN_INSYNC_REPLICAS": str(setting)}
    )
    assert config.topic_min_insync_replicas == expected


def test_a_consumer_without_a_group_still_gets_one_under_the_namespaces_prefix():
    conf = KafkaConfig.from_env({"KADENCE_NAMESPACE": "orders", "KADENCE_CLIENT_ID": "gw-1"}).consumer(None)
    assert conf["group.id"] == "orders.nogroup.gw-1"


def test_the_acls_of_several_components_are_sent_once_each(monkeypatch):
    """Components share rules (the no-group readers, IdempotentWrite): the admin client refuses a
    batch with the same binding twice, so each goes once."""
    from kadence.topics import acls

    sent = []

    class _Admin:
        def __init__(self, conf):
            pass

        def create_acls(self, bindings, request_timeout):
            sent.extend(bindings)
            assert len(set(bindings)) == len(bindings), "a binding sent twice"
            return {}

    monkeypatch.setattr(acls, "AdminClient", _Admin)
    config = KafkaConfig.from_env({"KADENCE_NAMESPACE": "orders"})
    count = acls.apply_acls(config, ["processor", "worker", "client", "admin"], "User:svc")
    assert count == len(sent) and len({b.name for b in sent if b.name == "orders.nogroup."}) == 1
