"""The topic contracts (issue 48 item 2): docs/asyncapi.yaml is what ``kadence topics asyncapi``
generates from the catalogue and the schemas, the AsyncAPI parser (with its Avro schema parser)
accepts it and refuses a broken copy, every topic the catalogue creates has a channel, and each
message's self-contained schema reads the records Kadence writes."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from pathlib import Path

import fastavro
import pytest
import yaml

from kadence.topics import Catalogue, KafkaConfig, serde
from kadence.topics.asyncapi import TOPICS, client_schemas, document, render, self_contained
from tests.support.avro_samples import samples

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "asyncapi.yaml"
TOOL = ROOT / "tools" / "asyncapi"


def validate(path: Path) -> subprocess.CompletedProcess:
    node = shutil.which("node")
    assert node, "node is missing: `make venv` installs it (scripts/devstack.py deps)"
    assert (TOOL / "node_modules" / "@asyncapi" / "parser").is_dir(), (
        "the AsyncAPI parser is missing: `make venv` installs it (npm ci in tools/asyncapi)"
    )
    return subprocess.run(
        [node, str(TOOL / "validate.mjs"), str(path)], capture_output=True, text=True, timeout=120, cwd=TOOL
    )


def test_the_kept_document_is_the_generated_one():
    assert DOC.read_text() == render(), (
        "docs/asyncapi.yaml is stale: regenerate it with `.venv/bin/kadence topics asyncapi -o docs/asyncapi.yaml`"
    )


def test_the_asyncapi_parser_accepts_the_document_and_refuses_a_broken_one(tmp_path):
    ok = validate(DOC)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert f"valid: {len(TOPICS)} channels" in ok.stdout
    assert "warning" not in ok.stdout, ok.stdout
    broken = document()
    broken["components"]["messages"]["Command"]["payload"]["schema"]["fields"][0]["type"] = "no-such-type"
    bad = tmp_path / "broken.yaml"
    bad.write_text(yaml.safe_dump(broken))
    refused = validate(bad)
    assert refused.returncode == 1, refused.stdout
    assert "invalid" in refused.stdout


def _pattern(address: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\\\{[a-z_]+\\\}", r"[^ ]+", re.escape(address)) + "$")


def test_every_topic_the_catalogue_creates_has_a_channel():
    cat = Catalogue(KafkaConfig(bootstrap="127.0.0.1:9", namespace="ns"))
    names = [s.name for s in cat.core_specs() + cat.queue_specs("orders") + cat.build_specs("orders", "v2")]
    patterns = [_pattern(t.address.replace("{namespace}", "ns")) for t in TOPICS]
    for name in names:
        matching = [t.address for t, p in zip(TOPICS, patterns, strict=True) if p.match(name)]
        assert matching, f"topic {name} has no channel in kadence.topics.asyncapi.TOPICS"
    # and the public contracts are the ones the issue names
    assert {t.channel for t in TOPICS if t.public} == {"commands", "replies", "history"}


@pytest.mark.parametrize("record", sorted({t.record for t in TOPICS}))
def test_each_messages_schema_stands_alone_and_reads_what_kadence_writes(record):
    schema = self_contained(record)
    parsed = fastavro.parse_schema(schema)  # no other schema needed
    values = samples(record)
    assert values
    for value in values:  # between them, every union branch
        raw = serde.encode(record, value)
        assert raw[0] == serde.MAGIC
        read = fastavro.schemaless_reader(io.BytesIO(raw[2:]), parsed)
        assert read == _tuples_as_dicts(serde.decode(record, raw))


def _tuples_as_dicts(value):
    """serde reads a union of records as (name, dict); fastavro as the dict alone."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return _tuples_as_dicts(value[1])
    if isinstance(value, dict):
        return {k: _tuples_as_dicts(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_tuples_as_dicts(v) for v in value]
    return value


def test_the_client_examples_schemas_are_the_current_ones():
    kept = ROOT / "docs" / "examples" / "clients" / "schemas"
    for name, text in client_schemas().items():
        assert (kept / name).read_text() == text, (
            f"docs/examples/clients/schemas/{name} is stale: regenerate with "
            "`.venv/bin/kadence topics asyncapi -o docs/asyncapi.yaml --schemas docs/examples/clients/schemas`"
        )
