"""The generated Avro functions (``kadence.topics.avro_codegen``) write and read exactly what the
closure codecs of ``avro_binary`` do, on their own (without the fallback that catches errors)."""

from __future__ import annotations

import pytest

from kadence.topics import avro_binary, avro_codegen, serde
from kadence.topics.avro_binary import Encoded
from kadence.topics.errors import SchemaError
from tests.support.avro_samples import RECORDS, samples


def _codecs(record: str):
    schema = serde.codec(record)._schema
    return (
        avro_codegen.compile_writer(schema),
        avro_binary.compile_writer(schema),
        avro_codegen.compile_reader(schema),
        avro_binary.compile_reader(schema),
    )


@pytest.mark.parametrize("record", RECORDS)
def test_generated_functions_write_and_read_what_the_closures_do(record):
    put, slow_put, get, slow_get = _codecs(record)
    for value in samples(record):
        fast, slow = bytearray(), bytearray()
        put.fast(fast, value)  # no fallback: a generated function that raised would fail here
        slow_put(slow, value)
        assert fast == slow
        assert get.fast(bytes(fast), 0) == slow_get(bytes(slow), 0) == (slow_get(bytes(slow), 0)[0], len(slow))


def test_an_encoded_event_inside_a_task_is_written_as_it_is():
    event = samples("HistoryEvent")[0]
    body = serde.encode("HistoryEvent", event)[2:]
    task = dict(samples("WorkflowTask")[0], events=[Encoded(body), event])
    put, _slow_put, get, _slow_get = _codecs("WorkflowTask")
    buf = bytearray()
    put.fast(buf, task)
    assert get.fast(bytes(buf), 0)[0]["events"] == [event, event]


@pytest.mark.parametrize("n", [0, 1, -1, 63, 64, -64, -65, 127, 128, 2**31 - 1, -(2**31), 2**62, 2**63 - 1, -(2**63)])
def test_the_inlined_varints_match_at_their_boundaries(n):
    put, slow_put, get, _ = _codecs("TimerRecord")
    timer = {"workflow_id": "w" * n if 0 <= n < 200 else "w", "run_id": "r", "timer_id": "t", "fire_at_ms": n}
    fast, slow = bytearray(), bytearray()
    put.fast(fast, timer)
    slow_put(slow, timer)
    assert fast == slow and get.fast(bytes(fast), 0)[0]["fire_at_ms"] == n


def test_a_bad_value_gets_the_closure_codecs_error_and_leaves_nothing_written():
    with pytest.raises(SchemaError, match=r"fire_at_ms"):
        serde.encode("TimerRecord", {"workflow_id": "w", "run_id": "r", "timer_id": "t", "fire_at_ms": "soon"})
    put, *_ = _codecs("TimerRecord")
    buf = bytearray(b"prefix")
    with pytest.raises(avro_binary.AvroValueError, match="timer_id"):
        put(buf, {"workflow_id": "w", "run_id": "r", "timer_id": None, "fire_at_ms": 1})
    assert buf == b"prefix"
