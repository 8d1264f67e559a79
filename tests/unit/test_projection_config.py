"""``ProjectionConfig.from_env``: the settings the projection process reads, and a typed error."""

import pytest

from kadence.connectors.projection_app import ProjectionConfig
from kadence.topics import ConfigError, KafkaConfig

KAFKA = KafkaConfig(bootstrap="127.0.0.1:9092", namespace="ns")


def test_defaults_refresh_topic_metadata_every_ten_seconds():
    config = ProjectionConfig.from_env(KAFKA, env={})
    assert config.metadata_max_age_s == 10.0
    assert config.session_timeout_s == 10.0  # as the engine's (a restart waits for the old member)


def test_reads_every_setting_in_milliseconds():
    config = ProjectionConfig.from_env(
        KAFKA,
        env={
            "KADENCE_PROJECTION_METADATA_MAX_AGE_MS": "2500",
            "KADENCE_SESSION_TIMEOUT_MS": "12000",
            "KADENCE_PROJECTION_COMMIT_MS": "500",
            "KADENCE_PROJECTION_BATCH": "10",
            "KADENCE_PROJECTION_ID": "v3",
        },
    )
    assert (
        config.metadata_max_age_s,
        config.session_timeout_s,
        config.commit_interval_s,
        config.batch_max,
        config.instance_id,
    ) == (2.5, 12.0, 0.5, 10, "v3")


def test_a_setting_that_is_not_a_number_is_a_config_error():
    with pytest.raises(
        ConfigError, match="KADENCE_PROJECTION_METADATA_MAX_AGE_MS='ten': must be a whole number of milliseconds"
    ):
        ProjectionConfig.from_env(KAFKA, env={"KADENCE_PROJECTION_METADATA_MAX_AGE_MS": "ten"})


def test_fausts_working_directory_is_not_the_current_one(tmp_path, monkeypatch):
    from kadence.connectors.projection_app import create_app

    monkeypatch.chdir(tmp_path)
    config = ProjectionConfig.from_env(
        KAFKA, env={"KADENCE_PROJECTION_DATA_DIR": str(tmp_path / "faust"), "KADENCE_PROJECTION_ID": "v0"}
    )
    app = create_app(config)
    assert (tmp_path / "faust").is_dir()  # Faust creates only the last level itself
    assert str(app.conf.datadir).startswith(str(tmp_path / "faust" / "ns.projections-v0"))
    assert ProjectionConfig.from_env(KAFKA, env={}).data_dir.endswith("kadence-projections")


def test_the_projections_take_the_same_tls_and_sasl_settings_as_every_other_client(tmp_path):
    """Faust's (aiokafka's) credentials are built from ``KADENCE_KAFKA_*``: SCRAM over TLS with
    the given CA; a CA file that is not a certificate is a ConfigError, before any connection."""
    import faust

    from kadence.connectors.projection_app import faust_credentials
    from kadence.devstack.cluster import TlsMaterial

    assert faust_credentials(KAFKA) is None
    tls = TlsMaterial(tmp_path / "tls").make()
    env = {
        "KADENCE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "KADENCE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "KADENCE_KAFKA_SASL_USERNAME": "proj",
        "KADENCE_KAFKA_SASL_PASSWORD": "pw",
        "KADENCE_KAFKA_SSL_CA": str(tls.ca_cert),
    }
    creds = faust_credentials(KafkaConfig.from_env(env))
    assert isinstance(creds, faust.SASLCredentials)
    assert (creds.username, creds.mechanism.value, creds.protocol.value) == ("proj", "SCRAM-SHA-512", "SASL_SSL")
    assert creds.ssl_context is not None and creds.ssl_context.check_hostname
    key, cert = tls.issue("proj-client")
    mtls = faust_credentials(
        KafkaConfig.from_env(
            {
                "KADENCE_KAFKA_SECURITY_PROTOCOL": "SSL",
                "KADENCE_KAFKA_SSL_CERT": str(cert),
                "KADENCE_KAFKA_SSL_KEY": str(key),
            }
        )
    )
    assert isinstance(mtls, faust.SSLCredentials)
    not_a_cert = tmp_path / "ca.txt"
    not_a_cert.write_text("not a certificate")
    with pytest.raises(ConfigError, match="cannot load the TLS files"):
        faust_credentials(KafkaConfig.from_env({**env, "KADENCE_KAFKA_SSL_CA": str(not_a_cert)}))
