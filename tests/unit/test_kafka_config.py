"""``KafkaConfig.from_env``: the client linger setting is read, checked, and defaults to 0."""

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
