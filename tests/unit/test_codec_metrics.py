"""Records of an older schema version are decoded by fastavro's schema resolution, not by the
generated reader: each is counted per record type and version, logged the first time, and
scraped as ``kadence_codec_old_version_decodes_total`` (issue 20). Every fallback from a
generated function to the closure codec is counted too (``kadence_codec_fallbacks_total``)."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from kadence.schemas import CURRENT_VERSION, load_schema_set
from kadence.topics import serde
from kadence.topics.codec_metrics import register_codec_metrics
from kadence.topics.errors import SchemaError
from kadence.topics.records import command
from tests.support.avro_samples import Samples
from tests.support.codecs import pin_write_version
from tests.support.fastavro_reference import parse_set, write


def _old_command(version: int) -> bytes:
    frozen = load_schema_set(version)
    value = next(iter(Samples(frozen, version).variants(next(s for s in frozen if s["name"] == "Command"), "Command")))
    return write(parse_set(frozen), "Command", value, version)


def _scraped(registry: CollectorRegistry, record: str, version: int) -> float:
    for line in generate_latest(registry).decode().splitlines():
        if line.startswith(f'kadence_codec_old_version_decodes_total{{record="{record}",version="{version}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_old_version_decodes_are_counted_logged_once_and_scraped(caplog):
    registry = CollectorRegistry()
    register_codec_metrics(registry)
    register_codec_metrics(registry)  # a second component in the same process: one family
    old = CURRENT_VERSION - 1
    data = _old_command(old)
    before = serde.old_version_decodes().get(("Command", old), 0)
    with caplog.at_level(logging.INFO, logger="kadence.topics.serde"):
        for _ in range(3):
            serde.decode("Command", data)
        serde.decode("Command", serde.encode("Command", command("w", "AwaitWorkflowResult", {"wait": True})))
    assert serde.old_version_decodes()[("Command", old)] == before + 3  # the current version is not counted
    assert ("Command", CURRENT_VERSION) not in serde.old_version_decodes()
    assert _scraped(registry, "Command", old) == before + 3
    text = generate_latest(registry).decode()
    assert text.count("# TYPE kadence_codec_old_version_decodes_total counter") == 1
    logged = [r for r in caplog.records if "schema version" in r.getMessage() and "Command" in r.getMessage()]
    assert len(logged) == (1 if before == 0 else 0)


def test_the_write_version_is_scraped_and_follows_the_pin(monkeypatch):
    registry = CollectorRegistry()
    register_codec_metrics(registry)
    assert registry.get_sample_value("kadence_codec_write_version") == CURRENT_VERSION
    pin_write_version(monkeypatch, CURRENT_VERSION - 1)
    try:
        assert registry.get_sample_value("kadence_codec_write_version") == CURRENT_VERSION - 1
    finally:
        pin_write_version(monkeypatch, None)


def _fallbacks_scraped(registry: CollectorRegistry, record: str, direction: str, outcome: str) -> float:
    labels = f'{{direction="{direction}",outcome="{outcome}",record="{record}"}}'
    for line in generate_latest(registry).decode().splitlines():
        if line.startswith("kadence_codec_fallbacks_total" + labels):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_value_and_a_record_both_codecs_refuse_are_counted_as_refused_fallbacks(caplog):
    registry = CollectorRegistry()
    register_codec_metrics(registry)
    before = serde.fallbacks()
    bad = {"workflow_id": "w", "run_id": "r", "timer_id": "t", "fire_at_ms": "soon"}
    with pytest.raises(SchemaError, match="fire_at_ms"):
        serde.encode("TimerRecord", bad)
    good = serde.encode("TimerRecord", {**bad, "fire_at_ms": 5})
    with caplog.at_level(logging.DEBUG, logger="kadence.topics.serde"), pytest.raises(SchemaError):
        serde.decode("TimerRecord", good[:-1])  # truncated
    after = serde.fallbacks()
    for key in (("TimerRecord", "write", "refused"), ("TimerRecord", "read", "refused")):
        assert after[key] == before.get(key, 0) + 1
        assert _fallbacks_scraped(registry, *key) == after[key]
    assert ("TimerRecord", "write", "recovered") not in after and ("TimerRecord", "read", "recovered") not in after
    assert all("soon" not in r.getMessage() for r in caplog.records)  # the value is not logged
