"""The compiled Avro codecs (``kadence.topics.avro_binary``) write the same bytes as fastavro and
read back what fastavro reads, for every record type and every union branch; broken input is a
``SchemaError``."""

from __future__ import annotations

import pytest

from kadence.schemas import CURRENT_VERSION
from kadence.topics import serde
from kadence.topics.errors import SchemaError
from kadence.topics.records import command
from tests.support.avro_samples import RECORDS, samples
from tests.support.fastavro_reference import fastavro_decode, fastavro_encode

from .engine_harness import Harness
from .replay_support import Three, drive


def _same_as_fastavro(record: str, value: dict) -> None:
    ours = serde.encode(record, value)
    assert ours == fastavro_encode(record, value)
    assert serde.decode(record, ours) == fastavro_decode(record, ours)


@pytest.mark.parametrize("record", RECORDS)
def test_every_variant_of_every_record_is_encoded_and_decoded_like_fastavro(record):
    variants = samples(record)
    assert variants
    for value in variants:
        _same_as_fastavro(record, value)


def test_the_records_of_a_whole_workflow_are_encoded_like_fastavro():
    h = Harness()
    h.start("wf-avro", "Three", [5])
    sent = []
    original = h.send

    def send(*args, **kw):
        out = original(*args, **kw)
        sent.append(out)
        return out

    h.send = send
    drive(h, Three)
    checked = 0
    for out in sent:
        for _, event in out.events:
            _same_as_fastavro("HistoryEvent", event)
            checked += 1
        for kind, _, task in out.tasks:
            _same_as_fastavro("WorkflowTask" if kind == "workflow" else "ActivityTask", task)
            checked += 1
        for reply in out.replies:
            _same_as_fastavro("Reply", reply)
    _same_as_fastavro("WorkflowState", h.store.get_state("wf-avro"))
    assert checked > 15


@pytest.mark.parametrize("n", [0, 1, -1, 63, -64, 64, 127, 128, 2**31 - 1, -(2**31), 2**53, 2**63 - 1, -(2**63)])
def test_longs_at_the_varint_boundaries(n):
    timer = {"workflow_id": "w", "run_id": "r", "timer_id": "t", "fire_at_ms": n}
    _same_as_fastavro("TimerRecord", timer)
    assert serde.decode("TimerRecord", serde.encode("TimerRecord", timer))["fire_at_ms"] == n


def test_a_long_and_an_int_out_of_range_are_schema_errors():
    with pytest.raises(SchemaError, match="fire_at_ms"):
        serde.encode("TimerRecord", {"workflow_id": "w", "run_id": "r", "timer_id": "t", "fire_at_ms": 2**63})
    with pytest.raises(SchemaError, match="attempt"):
        serde.encode(
            "TimerRecord", {"workflow_id": "w", "run_id": "r", "timer_id": "t", "fire_at_ms": 1, "attempt": 2**31}
        )


def test_the_path_of_a_bad_nested_field_is_named():
    body = {"scheduled_seq": 1, "commands": [("ScheduleActivityTask", {"activity_id": 7})]}
    with pytest.raises(SchemaError, match=r"body\.commands\.activity_id"):
        serde.encode("Command", command("w", "RespondWorkflowTaskCompleted", body, request_id="r"))


def test_none_is_not_an_empty_array_or_map():
    with pytest.raises(SchemaError, match="commands"):
        serde.encode("Command", command("w", "RespondWorkflowTaskCompleted", {"scheduled_seq": 1, "commands": None}))


@pytest.mark.parametrize("record", ["Command", "HistoryEvent", "WorkflowState", "WorkflowTask"])
def test_every_truncation_of_a_record_is_a_schema_error(record):
    data = serde.encode(record, samples(record)[0])
    for cut in range(2, len(data), max(1, len(data) // 400)):  # at most ~400 cuts (a task is large)
        with pytest.raises(SchemaError):
            serde.decode(record, data[:cut])


def test_a_union_branch_out_of_range_and_an_endless_varint_are_schema_errors():
    data = bytearray(serde.encode("Command", command("w", "AwaitWorkflowResult", {"wait": True}, request_id="r")))
    # the body's branch index is the varint before the AwaitWorkflowResult's one boolean byte,
    # which the null span_id's branch byte follows
    assert data[-1] == 0 and data[-2] == 1  # span_id null; wait = True
    data[-3] = 0x7E  # zigzag 63: no such branch
    with pytest.raises(SchemaError, match="branch"):
        serde.decode("Command", bytes(data))
    with pytest.raises(SchemaError):
        serde.decode("TimerRecord", bytes((serde.MAGIC, CURRENT_VERSION)) + b"\xff" * 20)
