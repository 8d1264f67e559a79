"""``KafkaConfig.from_env``: the client linger, transactional linger, fetch wait and idle reconnect
settings are read, checked, and have their documented defaults."""

from __future__ import annotations

import pytest

from kadence.topics import ConfigError, KafkaConfig


def test_client_linger_defaults_to_sending_at_once():
    assert KafkaConfig.from_env({}).client_linger_ms == 0.0


def test_client_linger_is_read_from_the_environment():
    assert KafkaConfig.from_env({"KADENCE_CLIENT_LINGER_MS": "2.5"}).client_linger_ms == 2.5


@pytest.mark.parametrize("raw", ["soon", "-1", "5000"])
def test_a_bad_client_linger_is_a_config_error(raw):
    with pytest.raises(ConfigError, match="LINGER|linger"):
        KafkaConfig.from_env({"KADENCE_CLIENT_LINGER_MS": raw})


def test_kafka_debug_reaches_every_client_and_is_off_by_default():
    assert "debug" not in KafkaConfig.from_env({}).producer()
    config = KafkaConfig.from_env({"KADENCE_KAFKA_DEBUG": "metadata,topic"})
    assert config.producer()["debug"] == "metadata,topic"
    assert config.consumer("g")["debug"] == "metadata,topic"


def test_transactional_producers_close_idle_connections_by_default():
    """The idle close is what un-sticks ``send_offsets_to_transaction`` after a broker restart
    (librdkafka #5511, decision 0035); only transactional producers get it."""
    config = KafkaConfig.from_env({})
    conf = config.transactional_producer("ns.processor.p0", **{"linger.ms": 1})
    assert conf["transactional.id"] == "ns.processor.p0"
    assert conf["connections.max.idle.ms"] == 3000
    assert conf["enable.idempotence"] is True and conf["linger.ms"] == 1
    assert "connections.max.idle.ms" not in config.producer()


def test_the_idle_reconnect_is_read_from_the_environment_and_can_be_turned_off():
    assert (
        KafkaConfig.from_env({"KADENCE_TXN_IDLE_RECONNECT_MS": "5000"}).transactional_producer("t")[
            "connections.max.idle.ms"
        ]
        == 5000
    )
    assert "connections.max.idle.ms" not in KafkaConfig.from_env(
        {"KADENCE_TXN_IDLE_RECONNECT_MS": "0"}
    ).transactional_producer("t")


@pytest.mark.parametrize("raw", ["soon", "-1", "500", "3600001"])
def test_a_bad_idle_reconnect_is_a_config_error(raw):
    with pytest.raises(ConfigError, match="TXN_IDLE_RECONNECT_MS|txn_idle_reconnect_ms"):
        KafkaConfig.from_env({"KADENCE_TXN_IDLE_RECONNECT_MS": raw})


def test_transactional_producers_do_not_linger_by_default():
    """Their transactions are flushed at commit: a linger only delays each one's first records."""
    config = KafkaConfig.from_env({})
    assert config.txn_linger_ms == 0.0
    assert config.transactional_producer("t")["linger.ms"] == 0.0
    assert KafkaConfig.from_env({"KADENCE_TXN_LINGER_MS": "1"}).transactional_producer("t")["linger.ms"] == 1.0
    # an explicit setting of the caller wins
    assert config.transactional_producer("t", **{"linger.ms": 5})["linger.ms"] == 5


@pytest.mark.parametrize("raw", ["soon", "-1", "5000"])
def test_a_bad_transactional_linger_is_a_config_error(raw):
    with pytest.raises(ConfigError, match="TXN_LINGER_MS|txn_linger_ms"):
        KafkaConfig.from_env({"KADENCE_TXN_LINGER_MS": raw})


def test_waiting_consumers_wait_long_in_the_broker_by_default():
    """An idle consumer asks again every fetch wait: the broker's CPU at idle. Bounded readers
    keep a short wait (one that ends on an empty fetch would wait as long)."""
    config = KafkaConfig.from_env({})
    assert config.waiting_consumer("g")["fetch.wait.max.ms"] == 500
    assert config.consumer("g")["fetch.wait.max.ms"] == 50
    assert KafkaConfig.from_env({"KADENCE_FETCH_WAIT_MS": "100"}).waiting_consumer("g")["fetch.wait.max.ms"] == 100
    assert config.waiting_consumer("g", **{"fetch.wait.max.ms": 5})["fetch.wait.max.ms"] == 5


@pytest.mark.parametrize("raw", ["soon", "0", "10001", "2.5"])
def test_a_bad_fetch_wait_is_a_config_error(raw):
    with pytest.raises(ConfigError, match="FETCH_WAIT_MS|fetch_wait_ms"):
        KafkaConfig.from_env({"KADENCE_FETCH_WAIT_MS": raw})
