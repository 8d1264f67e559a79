"""The processor's group protocol settings (decision 0050): classic by default, with the session
timeout and heartbeat it is given; KIP-848 leaves them to the brokers (librdkafka refuses them)."""

import pytest
from confluent_kafka import Consumer

from kadence.processors.processor_config import ProcessorConfig, group_membership
from kadence.topics import ConfigError, KafkaConfig

KAFKA = KafkaConfig(bootstrap="127.0.0.1:9", namespace="ns")


def test_classic_is_the_default_with_the_session_timeout_and_heartbeat_given():
    config = ProcessorConfig.from_env(
        KAFKA, {"KADENCE_SESSION_TIMEOUT_MS": "7000", "KADENCE_PROCESSOR_HEARTBEAT_MS": "500"}
    )
    assert group_membership(config) == {
        "session.timeout.ms": 7000,
        "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": "cooperative-sticky",
    }


def test_kip848_leaves_the_session_and_the_assignor_to_the_brokers_and_librdkafka_accepts_it():
    config = ProcessorConfig.from_env(KAFKA, {"KADENCE_PROCESSOR_GROUP_PROTOCOL": "consumer"})
    settings = group_membership(config)
    assert settings == {"group.protocol": "consumer"}
    Consumer({"bootstrap.servers": KAFKA.bootstrap, "group.id": "g", **settings}).close()
    with pytest.raises(Exception, match="session.timeout.ms"):  # what the classic settings would meet
        Consumer({"bootstrap.servers": KAFKA.bootstrap, "group.id": "g", **settings, "session.timeout.ms": 7000})


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KADENCE_PROCESSOR_GROUP_PROTOCOL": "eager"}, "group_protocol must be 'classic' or 'consumer'"),
        ({"KADENCE_PROCESSOR_HEARTBEAT_MS": "0"}, "heartbeat_interval_ms must be > 0"),
    ],
)
def test_a_bad_setting_is_refused_with_its_name(env, message):
    with pytest.raises(ConfigError, match=message):
        ProcessorConfig.from_env(KAFKA, env)
