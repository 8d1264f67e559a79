"""The records' TypedDict definitions (schemas/records.py) are the generator's output for the
current schemas, and each one declares exactly its schema's fields (issue 20)."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from kadence.schemas import load_schema_set, records
from kadence.schemas.typegen import render
from kadence.topics import serde

SCHEMAS = {s["name"].rpartition(".")[2]: s for s in load_schema_set()}


def _all_named(schema: dict, out: dict) -> dict:
    """Every record defined in ``schema``, inline ones included."""
    out[schema["name"].rpartition(".")[2]] = schema

    def walk(t) -> None:
        if isinstance(t, list):
            for branch in t:
                walk(branch)
        elif isinstance(t, dict):
            if t.get("type") == "record":
                _all_named(t, out)
            elif t.get("type") == "array":
                walk(t["items"])
            elif t.get("type") == "map":
                walk(t["values"])

    for f in schema["fields"]:
        walk(f["type"])
    return out


NAMED: dict = {}
for _schema in SCHEMAS.values():
    _all_named(_schema, NAMED)


def test_the_committed_module_is_what_the_generator_writes():
    committed = Path(records.__file__).read_text()
    assert committed == render(), "schemas/records.py is stale: run `python -m kadence.schemas types`"


@pytest.mark.parametrize("name", sorted(NAMED))
def test_each_record_type_declares_its_schemas_fields(name):
    typed = getattr(records, name)
    fields = NAMED[name]["fields"]
    assert set(typed.__required_keys__) == {f["name"] for f in fields if "default" not in f}
    assert set(typed.__optional_keys__) == {f["name"] for f in fields if "default" in f}
    assert name in records.__all__


def test_a_decoded_record_has_every_key_its_type_declares():
    # a record written with only its required fields reads back with every field (defaults filled)
    state = {
        "workflow_id": "wf",
        "run_id": "r",
        "workflow_type": "T",
        "task_queue": "q",
        "status": "running",
        "start_time_ms": 1,
        "next_seq": 2,
    }
    decoded = serde.decode("WorkflowState", serde.encode("WorkflowState", state))
    declared = records.WorkflowState.__required_keys__ | records.WorkflowState.__optional_keys__
    assert set(decoded) == set(declared)


def test_a_union_of_several_records_is_typed_as_name_and_record_pairs():
    hints = typing.get_type_hints(records.HistoryEvent)
    branches = typing.get_args(hints["attributes"])
    assert len(branches) == len(
        SCHEMAS["HistoryEvent"]["fields"][[f["name"] for f in SCHEMAS["HistoryEvent"]["fields"]].index("attributes")][
            "type"
        ]
    )
    name, record = typing.get_args(branches[0])
    assert typing.get_args(name) == ("WorkflowExecutionStarted",) and record is records.WorkflowExecutionStarted
