"""Settings declared once (issue 20): ``topics.settings`` reads a config's declared variables,
typed by its annotations, and makes its command-line options from the same declaration."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from kadence.cli.collector import CollectorSettings
from kadence.connectors.archiver import ArchiverConfig
from kadence.connectors.projection_app import ProjectionConfig
from kadence.gateway.config import GatewayConfig
from kadence.processors import ProcessorConfig, TimerConfig
from kadence.topics.archive import ArchiveStoreConfig
from kadence.topics.config import KafkaConfig
from kadence.topics.errors import ConfigError
from kadence.topics.large_payloads import KIB, MIB, LargePayloadConfig
from kadence.topics.settings import click_options, from_env, given_options, setting, settings_of

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, kw_only=True)
class Sample:
    name: str  # not a setting: given by the caller
    count: int = setting(3, env="T_COUNT", help="how many")
    ratio: float = setting(0.5, env="T_RATIO", help="how much")
    label: str | None = setting(None, env="T_LABEL", help="what to call it")
    loud: bool = setting(False, env="T_LOUD", help="shout")

    def __post_init__(self):
        if self.count < 0:
            raise ConfigError("count must be >= 0")


def test_each_declared_variable_is_read_with_its_type():
    got = from_env(Sample, {"T_COUNT": "7", "T_RATIO": "1.25", "T_LABEL": "x", "T_LOUD": "yes"}, name="n")
    assert got == Sample(name="n", count=7, ratio=1.25, label="x", loud=True)
    assert from_env(Sample, {"T_COUNT": "", "T_LOUD": "off"}, name="n") == Sample(name="n")  # empty: the default


@pytest.mark.parametrize(
    ("var", "raw", "message"),
    [
        ("T_COUNT", "many", r"T_COUNT='many': count must be an integer"),
        ("T_RATIO", "1,5", r"T_RATIO='1,5': ratio must be a number"),
        ("T_LOUD", "maybe", r"T_LOUD='maybe': loud must be true or false"),
        ("T_COUNT", "-1", r"count must be >= 0"),  # the class's own check runs on a parsed value
    ],
)
def test_a_value_that_does_not_parse_is_a_config_error_naming_the_variable(var, raw, message):
    with pytest.raises(ConfigError, match=message):
        from_env(Sample, {var: raw}, name="n")


def test_what_the_caller_gives_wins_over_the_variable():
    assert from_env(Sample, {"T_COUNT": "7"}, name="n", count=9).count == 9


def test_the_options_come_from_the_declaration_and_win_over_the_variables():
    @click.command()
    @click_options(Sample)
    def cmd(**options):
        click.echo(repr(from_env(Sample, {"T_COUNT": "7", "T_RATIO": "2"}, name="n", **given_options(Sample, options))))

    runner = CliRunner()
    out = runner.invoke(cmd, ["--count", "4", "--loud", "true"])
    assert out.exit_code == 0, out.output
    assert "count=4" in out.output and "ratio=2.0" in out.output and "loud=True" in out.output
    assert runner.invoke(cmd, ["--count", "x"]).exit_code == 2  # click's own usage error
    help_text = runner.invoke(cmd, ["--help"]).output
    assert "--count INTEGER" in help_text and "[env T_COUNT; default 3]" in help_text
    assert "--label TEXT" in help_text and "--name" not in help_text


@pytest.mark.parametrize(
    ("cls", "doc", "not_from_env"),
    [
        (ProcessorConfig, "guide.md", set()),
        # the TLS/SASL variables are gathered into one dict of librdkafka's names
        (KafkaConfig, "guide.md", {"security"}),
        # how often the lag is reported is set in code
        (ProjectionConfig, "projections.md", {"status_interval_s"}),
        (TimerConfig, "guide.md", set()),
        # composed of other configs' settings (the archive's, the payload store's), or set in code
        (
            GatewayConfig,
            "gateway.md",
            {"retry_after_seconds", "read_your_writes", "archive", "large_payloads", "extra"},
        ),
        (ArchiveStoreConfig, "archival.md", set()),
        # the store is the archive store's settings; batch and identity are set in code
        (ArchiverConfig, "archival.md", {"store", "batch", "identity"}),
        # the store is the archive store's settings read with KADENCE_PAYLOAD_
        (LargePayloadConfig, "guide.md", {"store"}),
        (CollectorSettings, "guide.md", set()),
    ],
)
def test_every_setting_is_declared_once_and_documented(cls, doc, not_from_env):
    declared = {s.name for s in settings_of(cls)}
    fields = set(cls.__dataclass_fields__) - {"kafka"} - not_from_env
    assert declared == fields  # nothing read from the environment by hand beside the declaration
    rows = [line for line in (ROOT / "docs" / doc).read_text().splitlines() if line.startswith("|")]
    undocumented = [s.env for s in settings_of(cls) if not any(f"`{s.env}" in row for row in rows)]
    assert undocumented == [], f"docs/{doc}'s tables do not name {undocumented}"


def test_the_processor_command_refuses_a_setting_that_does_not_parse():
    from kadence.cli.main import main

    out = CliRunner().invoke(
        main, ["processor"], env={"KADENCE_TXN_HANG_S": "soon"}, obj=KafkaConfig.from_env({}), catch_exceptions=False
    )
    assert out.exit_code == 2
    assert "KADENCE_TXN_HANG_S='soon'" in out.output


def test_kafka_settings_come_from_their_declaration_and_an_empty_bootstrap_is_refused():
    env = {
        "KADENCE_KAFKA_BOOTSTRAP": "kafka:9092",
        "KADENCE_NAMESPACE": "orders",
        "KADENCE_REPLICATION": "3",
        "KADENCE_CLIENT_ID": "billing-7",
        "KADENCE_CLIENT_LINGER_MS": "2.5",
        "KADENCE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "KADENCE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "KADENCE_KAFKA_SASL_USERNAME": "svc",
        "KADENCE_KAFKA_SASL_PASSWORD": "s3cret",
        "KADENCE_LOG_FORMAT": "",  # empty: the default
    }
    got = KafkaConfig.from_env(env, partitions=8)
    assert (got.bootstrap, got.namespace, got.partitions, got.replication) == ("kafka:9092", "orders", 8, 3)
    assert (got.client_id, got.client_linger_ms, got.log_format) == ("billing-7", 2.5, "text")
    assert got.security == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "svc",
        "sasl.password": "s3cret",
    }
    # set to nothing is a mistake to report, not a reason to use localhost or the default namespace
    with pytest.raises(ConfigError, match="bootstrap servers are empty"):
        KafkaConfig.from_env({"KADENCE_KAFKA_BOOTSTRAP": ""})
    with pytest.raises(ConfigError, match="namespace ''"):
        KafkaConfig.from_env({"KADENCE_NAMESPACE": " "})
    with pytest.raises(ConfigError, match=r"KADENCE_REPLICATION='': replication must be an integer"):
        KafkaConfig.from_env({"KADENCE_REPLICATION": ""})
    with pytest.raises(ConfigError, match=r"KADENCE_FETCH_WAIT_MS='soon': fetch_wait_ms must be an integer"):
        KafkaConfig.from_env({"KADENCE_FETCH_WAIT_MS": "soon"})


def test_projection_settings_in_milliseconds_become_seconds_and_bad_ones_are_refused():
    kafka = KafkaConfig.from_env({})
    got = ProjectionConfig.from_env(
        kafka, {"KADENCE_PROJECTION_BATCH_WAIT_MS": "50", "KADENCE_SESSION_TIMEOUT_MS": "6000"}
    )
    assert (got.batch_within_s, got.session_timeout_s, got.batch_max) == (0.05, 6.0, 2000)
    with pytest.raises(ConfigError, match="KADENCE_PROJECTION_COMMIT_MS='-1'"):
        ProjectionConfig.from_env(kafka, {"KADENCE_PROJECTION_COMMIT_MS": "-1"})
    with pytest.raises(ConfigError, match="KADENCE_PROJECTION_BATCH='many'"):
        ProjectionConfig.from_env(kafka, {"KADENCE_PROJECTION_BATCH": "many"})


def test_the_payload_store_reads_the_archive_stores_declarations_under_its_own_prefix():
    env = {
        "KADENCE_PAYLOAD_S3_BUCKET": "payloads",
        "KADENCE_PAYLOAD_S3_PREFIX": "p/",
        "KADENCE_ARCHIVE_S3_BUCKET": "archives",  # the archive's: not the payload store's
        "KADENCE_PAYLOAD_THRESHOLD": "64KiB",
        "KADENCE_PAYLOAD_LIMIT": "5m",
    }
    got = LargePayloadConfig.from_env(env)
    assert got.store == ArchiveStoreConfig(s3_bucket="payloads", s3_prefix="p/")
    assert (got.threshold, got.limit) == (64 * KIB, 5 * MIB)
    assert ArchiveStoreConfig.from_env(env).s3_bucket == "archives"
    assert LargePayloadConfig.from_env({"KADENCE_PAYLOAD_THRESHOLD": "1k"}).store is None  # no store named
    with pytest.raises(ConfigError, match="KADENCE_PAYLOAD_LIMIT='lots': a size in bytes"):
        LargePayloadConfig.from_env({"KADENCE_PAYLOAD_LIMIT": "lots"})


def test_archiver_retention_option_then_variable_then_config_file_then_default(tmp_path):
    kafka = KafkaConfig(namespace="shop")
    conf = tmp_path / "archive.toml"
    conf.write_text('[retention]\ndefault = "30d"\n[retention.namespaces]\nshop = "2d"\n')
    day = 86_400.0
    assert ArchiverConfig.from_env(kafka, {}).retention_s == 7 * day
    assert ArchiverConfig.from_env(kafka, {}, config_file=str(conf)).retention_s == 2 * day
    env = {"KADENCE_ARCHIVE_CONFIG": str(conf), "KADENCE_ARCHIVE_RETENTION": "12h"}
    assert ArchiverConfig.from_env(kafka, env).retention_s == day / 2
    assert ArchiverConfig.from_env(kafka, env, retention_s=60.0).retention_s == 60.0
    got = ArchiverConfig.from_env(kafka, {"KADENCE_ARCHIVE_SWEEP_INTERVAL": "500ms", "KADENCE_ARCHIVE_DIR": "/a"})
    assert (got.sweep_interval_s, got.store.directory) == (0.5, "/a")
    with pytest.raises(ConfigError, match="KADENCE_ARCHIVE_RETENTION='soon': not a duration"):
        ArchiverConfig.from_env(kafka, {"KADENCE_ARCHIVE_RETENTION": "soon"})


def test_the_archive_commands_options_come_from_the_declarations():
    from kadence.cli import main as cli

    runner = CliRunner()
    run_help = " ".join(runner.invoke(cli, ["archive", "run", "--help"]).output.split())  # unwrapped
    status_help = " ".join(runner.invoke(cli, ["archive", "status", "--help"]).output.split())
    for s in [*settings_of(ArchiveStoreConfig), *settings_of(ArchiverConfig)]:
        assert s.option in run_help and f"env {s.env}" in run_help, s
    assert "--dir TEXT" in run_help and "--retention TEXT" in run_help  # the documented names
    assert "--sweep-interval" in run_help and "--sweep-interval" not in status_help
