"""``KADENCE_SCHEMA_WRITE_VERSION``: a process of the new release that writes the schema version
the previous release reads (issue 20: a rolling upgrade). The broker test with two releases side
by side is tests/integration/test_rolling_upgrade.py."""

from __future__ import annotations

import io

import fastavro
import pytest

from kadence.schemas import CURRENT_VERSION, load_schema_set
from kadence.topics import serde
from kadence.topics.errors import ConfigError, SchemaError
from tests.support.avro_samples import RECORDS, samples, typed_search_attribute
from tests.support.codecs import pin_write_version
from tests.support.fastavro_reference import parse_set, short_names, write

PREVIOUS = CURRENT_VERSION - 1


@pytest.fixture
def pin(monkeypatch):
    """Pin the write version for one test (the codecs are made again, before and after)."""

    yield lambda value: pin_write_version(monkeypatch, value)
    pin_write_version(monkeypatch, None)


def _as_read_by(old, new):
    """``new`` with only the fields that ``old`` also has, at every depth (compared both ways:
    the fields two schema versions share)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return {k: _as_read_by(old[k], new[k]) for k in old if k in new}
    if isinstance(old, tuple) and isinstance(new, tuple):
        return (new[0], _as_read_by(old[1], new[1]))
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [_as_read_by(o, n) for o, n in zip(old, new, strict=True)]
    return new


def test_unpinned_writes_the_current_version(pin):
    pin("")
    assert serde.write_version() == CURRENT_VERSION
    assert serde.encode("WorkflowState", samples("WorkflowState")[0])[1] == CURRENT_VERSION


def _new_branch(value, old) -> bool:
    """Does ``value`` take a union branch that is a record the previous version lacks?"""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return value[0] not in old or _new_branch(value[1], old)
    if isinstance(value, dict):
        return any(_new_branch(v, old) for v in value.values())
    if isinstance(value, list):
        return any(_new_branch(v, old) for v in value)
    return False


@pytest.mark.parametrize("record", RECORDS)
def test_pinned_writes_the_bytes_the_previous_release_writes(pin, record):
    """Every record type, every union branch: what the pinned writer produces is what fastavro
    writes with the previous version's schema (fields added since are left out), and the
    previous version's schemas read it back."""
    pin(str(PREVIOUS))
    old = parse_set(load_schema_set(PREVIOUS))
    if record not in old:  # new in this version: cannot be written while pinned
        with pytest.raises(SchemaError, match="has no"):
            serde.encode(record, samples(record)[0])
        return
    for value in samples(record):
        if _new_branch(value, old):  # a union branch added since: the pinned writer refuses it
            with pytest.raises(SchemaError, match="has no"):
                serde.encode(record, value)
            continue
        if PREVIOUS < 13 and typed_search_attribute(value):  # a branch the pinned version lacks
            with pytest.raises(SchemaError, match="search_attributes"):
                serde.encode(record, value)
            continue
        data = serde.encode(record, value)
        assert data[:2] == bytes((serde.MAGIC, PREVIOUS))
        assert data == write(old, record, value, PREVIOUS)
        # the previous release's reader: no field of the newer schema, nothing misread
        back = short_names(
            fastavro.schemaless_reader(
                io.BytesIO(data[2:]), old[record], return_record_name=True, return_record_name_override=True
            )
        )
        assert _as_read_by(value, back) == _as_read_by(back, value)
        # and the new release reads it too (a field the old version lacks takes its default)
        assert serde.decode(record, data).keys() == value.keys()


def test_a_field_newer_than_the_pin_is_left_out_and_read_back_as_its_default(pin):
    pin("10")  # WorkflowState.history_bytes is new in version 11
    value = next(v for v in samples("WorkflowState") if v.get("history_bytes") is not None)
    value = {**value, "search_attributes": {"tier": "gold"}}  # a value version 10 can hold
    decoded = serde.decode("WorkflowState", serde.encode("WorkflowState", value))
    assert value["history_bytes"] is not None and decoded["history_bytes"] is None
    assert serde.codec("WorkflowState").old_version_decodes == {10: 1}


def test_what_the_pinned_version_cannot_hold_fails_to_encode(pin):
    pin("9")  # before PauseWorkflow (version 10)
    pause = next(v for v in samples("Command") if v["body"][0] == "PauseWorkflow" and not typed_search_attribute(v))
    with pytest.raises(SchemaError, match="cannot encode Command"):
        serde.encode("Command", pause)
    pin("5")  # before BuildDefault (version 6)
    with pytest.raises(SchemaError, match="schema version 5 .* has no BuildDefault record"):
        serde.encode("BuildDefault", samples("BuildDefault")[0])
    plain = next(v for v in samples("Command") if not typed_search_attribute(v))
    assert serde.encode("Command", plain)[1] == 5  # what version 5 has still works


@pytest.mark.parametrize("raw", ["ten", "0", str(CURRENT_VERSION + 1), "-3"])
def test_a_pin_that_names_no_version_of_this_release_is_a_config_error(pin, raw):
    pin(raw)
    with pytest.raises(ConfigError, match="KADENCE_SCHEMA_WRITE_VERSION"):
        serde.encode("WorkflowState", samples("WorkflowState")[0])
