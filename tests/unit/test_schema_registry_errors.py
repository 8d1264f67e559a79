"""The schema registry's wire format without a registry (decision 0056): what is refused, and how
the registry client's failures map onto Kadence's error tree (the registry itself is exercised by
tests/integration/test_schema_registry.py)."""

from __future__ import annotations

import httpx2
import pytest
from confluent_kafka.schema_registry.error import SchemaRegistryError as ClientError

from kadence.topics import schema_registry, serde
from kadence.topics.config import KafkaConfig
from kadence.topics.errors import (
    ConfigError,
    IncompatibleSchemaError,
    SchemaError,
    SchemaNotRegisteredError,
    SchemaRegistryAccessError,
    SchemaRegistryUnavailableError,
)
from kadence.topics.records import command

URL = "http://registry.invalid:8081/apis/ccompat/v6"


def test_without_a_registry_the_format_is_kadences_and_a_confluent_record_is_refused_by_name(monkeypatch):
    monkeypatch.delenv("KADENCE_SCHEMA_REGISTRY_URL", raising=False)
    monkeypatch.setattr(schema_registry, "_REGISTRIES", {})
    codec = serde.topic_codec("Command", "ns.commands", "")
    raw = codec.encode(command("wf", "AwaitWorkflowResult", {"wait": False}))
    assert raw[:1] == b"K"
    with pytest.raises(SchemaError, match="Confluent wire format \\(schema ID 7\\).*KADENCE_SCHEMA_REGISTRY_URL"):
        serde.codec("Command").decode(b"\0\0\0\0\x07" + raw[2:])


def test_the_registry_url_is_checked_and_kept_out_of_the_configs_repr():
    with pytest.raises(ConfigError, match="http:// or https://"):
        KafkaConfig(schema_registry_url="registry:8081")
    config = KafkaConfig(schema_registry_url="https://user:secret@registry:8081/apis/ccompat/v6")
    assert "secret" not in repr(config)
    assert schema_registry.shown(config.schema_registry_url) == "https://***@registry:8081/apis/ccompat/v6"


class _Refusing:
    """A registry client whose every call fails the same way."""

    def __init__(self, exc: Exception) -> None:
        self.exc, self.calls = exc, 0

    def lookup_schema(self, *_args, **_kwargs):
        self.calls += 1
        raise self.exc


@pytest.mark.parametrize(
    ("failure", "error", "calls"),
    [
        (ClientError(401, 40101, "unauthorized"), SchemaRegistryAccessError, 1),
        (ClientError(403, 40301, "forbidden"), SchemaRegistryAccessError, 1),
        (ClientError(404, 40401, "Subject not found"), SchemaNotRegisteredError, 1),
        (ClientError(409, 409, "Incompatible schema"), IncompatibleSchemaError, 1),
        (ClientError(503, 50301, "busy"), SchemaRegistryUnavailableError, 4),
        # two registrations of one schema at once: Apicurio answers one with a conflict
        (ClientError(409, 0, "An artifact version 'null' ... already exists."), SchemaRegistryUnavailableError, 4),
        (ClientError(400, 42201, "Invalid schema"), ConfigError, 1),
        (httpx2.ConnectError("refused"), SchemaRegistryUnavailableError, 4),
    ],
)
def test_each_registry_failure_is_a_typed_error_and_only_an_outage_is_retried(monkeypatch, failure, error, calls):
    monkeypatch.setattr(schema_registry, "_FIRST_PAUSE_S", 0.0)
    fake = _Refusing(failure)
    found = schema_registry.SchemaRegistry("https://user:pw@registry.invalid/apis/ccompat/v6", client=fake)
    with pytest.raises(error) as caught:
        found.schema_id("ns.commands", "Command")
    assert fake.calls == calls
    assert "pw" not in str(caught.value)


def test_a_registry_url_that_is_not_http_is_refused():
    with pytest.raises(ConfigError, match="not an http"):
        schema_registry.SchemaRegistry("ftp://registry")


class _Down:
    """A registry that does not answer."""

    url = "http://down.invalid/apis/ccompat/v6"

    def writer_schema(self, schema_id):
        raise SchemaRegistryUnavailableError(f"the schema registry did not answer schema ID {schema_id}")


def test_a_registry_outage_while_reading_is_not_a_schema_error_so_the_record_is_not_dead_lettered():
    """The processor dead-letters what raises SchemaError; an outage must escape that (it stops
    the processor before its transaction commits, and the restart reads the record again)."""
    assert not issubclass(SchemaRegistryUnavailableError, SchemaError)
    raw = serde.codec("Command").encode(command("wf", "AwaitWorkflowResult", {"wait": False}))
    with pytest.raises(SchemaRegistryUnavailableError):
        serde.codec("Command").decode(b"\0\0\0\0\x07" + raw[2:], _Down())
