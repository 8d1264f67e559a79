"""Avro serialization of the records that cross Kafka: what goes in comes out, bad input is a
``SchemaError`` (never a fastavro/ValueError/KeyError the caller has to know about)."""

from __future__ import annotations

import pytest

from kadence.schemas import CURRENT_VERSION, load_schema_set
from kadence.topics import serde
from kadence.topics.errors import KadenceError, SchemaError
from kadence.topics.records import command, history_key, idempotency_key
from tests.support.avro_samples import PRIMITIVES, Samples
from tests.support.fastavro_reference import parse_set, write

WF, RUN = "order-Ω-17", "9b2f0c8e-run"

FAILURE = {
    "type": "ActivityError",
    "message": "activity charge failed",
    "stack_trace": "Traceback ...",
    "non_retryable": False,
    "details": b'{"attempt":3}',
    "cause": {
        "type": "ValueError",
        "message": "card declined ✗",
        "stack_trace": "",
        "non_retryable": True,
        "details": None,
        "cause": None,
    },
}
RETRY = {
    "initial_interval_ms": 500,
    "backoff_coefficient": 1.5,
    "maximum_interval_ms": 60_000,
    "maximum_attempts": 5,
    "non_retryable_error_types": ["ValueError", "KeyError"],
}
OPTIONS = {
    "task_queue": "payments",
    "schedule_to_close_timeout_ms": 600_000,
    "schedule_to_start_timeout_ms": None,
    "start_to_close_timeout_ms": 30_000,
    "heartbeat_timeout_ms": 5_000,
    "retry_policy": RETRY,
}
SCHEDULE = {"activity_id": "2", "activity_type": "charge", "input": b'[6500,"EUR"]', "options": OPTIONS}

COMMAND_BODIES = {
    "StartWorkflow": {
        "workflow_type": "OrderFulfilment",
        "task_queue": "orders",
        "input": b'[{"id":"A-1"}]',
        "id_reuse_policy": "reject_duplicate",
        "run_timeout_ms": 86_400_000,
        "search_attributes": {"customer": "Zoë", "region": "eu"},
    },
    "RespondWorkflowTaskCompleted": {
        "scheduled_seq": 2,
        "identity": "worker-1",
        "build_id": "b-42",
        "commands": [
            ("ScheduleActivityTask", SCHEDULE),
            ("CompleteWorkflowExecution", {"result": b"108"}),
            ("FailWorkflowExecution", {"failure": FAILURE}),
        ],
    },
    "RespondWorkflowTaskFailed": {
        "scheduled_seq": 7,
        "cause": "non_determinism",
        "failure": FAILURE,
        "identity": "worker-2",
    },
    "RequestWorkflowHistory": {"scheduled_seq": 9, "identity": "worker-3"},
    "RespondActivityTaskCompleted": {
        "activity_id": "2",
        "scheduled_seq": 5,
        "attempt": 3,
        "result": b"true",
        "identity": "aw-1",
    },
    "RespondActivityTaskFailed": {
        "activity_id": "2",
        "scheduled_seq": 5,
        "attempt": 1,
        "failure": FAILURE,
        "identity": "aw-1",
    },
    "AwaitWorkflowResult": {"wait": False},
}

EVENT_ATTRIBUTES = {
    "WorkflowExecutionStarted": {
        "workflow_type": "OrderFulfilment",
        "task_queue": "orders",
        "input": b"[3]",
        "attempt": 1,
        "continued_from_run_id": "prev-run",
        "parent_workflow_id": None,
        "parent_run_id": None,
        "run_timeout_ms": None,
        "build_id": "b-42",
        "search_attributes": {"k": "v"},
    },
    "WorkflowTaskScheduled": {"task_queue": "orders", "attempt": 2},
    "WorkflowTaskCompleted": {"scheduled_seq": 2, "identity": "worker-1", "build_id": None},
    "ActivityTaskScheduled": {**SCHEDULE, "workflow_task_completed_seq": 4},
    "ActivityTaskCompleted": {"activity_id": "2", "scheduled_seq": 5, "attempt": 1, "result": b"4", "identity": "aw-1"},
    "ActivityTaskFailed": {
        "activity_id": "2",
        "scheduled_seq": 5,
        "attempt": 4,
        "failure": FAILURE,
        "identity": "aw-1",
    },
    "WorkflowExecutionCompleted": {"result": b"108"},
    "WorkflowExecutionFailed": {"failure": FAILURE},
}


def _event(seq: int, kind: str) -> dict:
    return {
        "event_id": f"ev-{seq}",
        "aggregate_key": WF,
        "run_id": RUN,
        "seq": seq,
        "timestamp_ms": 1_700_000_000_000 + seq,
        "trace_id": "trace-1",
        "request_id": None if seq % 2 else f"req-{seq}",
        "attributes": (kind, _sample(kind)),
    }


SCHEMAS = {s["name"]: s for s in load_schema_set()}


def _union(record: str, field: str) -> list[str]:
    return next(f["type"] for f in SCHEMAS[record]["fields"] if f["name"] == field)


def _sample(record: str) -> dict:
    """A hand-written value when there is one, else one built from the schema."""
    known = {**COMMAND_BODIES, **EVENT_ATTRIBUTES}
    return known[record] if record in known else Samples(load_schema_set()).variants(SCHEMAS[record], record)[0]


def expected(schema, value):
    """What a reader returns for ``value``: absent fields filled with their defaults."""
    if isinstance(schema, str):
        return value if schema in PRIMITIVES else expected(SCHEMAS[schema], value)
    if isinstance(schema, list):  # union
        if value is None:
            return None
        if isinstance(value, tuple):
            return (value[0], expected(SCHEMAS[value[0]], value[1]))
        records = [b for b in schema if isinstance(b, str) and b in SCHEMAS]
        return expected(records[0], value) if isinstance(value, dict) and len(records) == 1 else value
    kind = schema["type"]
    if kind == "record":
        out = {}
        for f in schema["fields"]:
            if f["name"] in value:
                out[f["name"]] = expected(f["type"], value[f["name"]])
            else:
                out[f["name"]] = expected(f["type"], _default(f))
        return out
    if kind == "array":
        return [expected(schema["items"], v) for v in value]
    if kind == "map":
        return {k: expected(schema["values"], v) for k, v in value.items()}
    return value


def _default(field: dict):
    """A field's default as a reader returns it (Avro spells a bytes default as a JSON string)."""
    kind = field["type"][0] if isinstance(field["type"], list) else field["type"]
    default = field["default"]
    return default.encode("latin-1") if kind == "bytes" and isinstance(default, str) else default


def _roundtrip(record: str, value: dict) -> dict:
    data = serde.encode(record, value)
    assert isinstance(data, bytes) and data[:2] == bytes((0x4B, CURRENT_VERSION))
    out = serde.decode(record, data)
    assert out == expected(record, value)
    return out


@pytest.mark.parametrize("body_type", _union("Command", "body"))
def test_command_round_trips_with_each_body(body_type):
    cmd = command(
        WF, body_type, _sample(body_type), request_id="req-1", run_id=RUN, trace_id="t-1", expected_version=12
    )
    out = _roundtrip("Command", cmd)
    assert out["body"][0] == body_type and out["request_id"] == "req-1" and out["aggregate_key"] == WF


def test_command_optional_envelope_fields_default_to_none():
    cmd = {"event_id": "e", "aggregate_key": WF, "timestamp_ms": 5, "body": ("AwaitWorkflowResult", {})}
    out = _roundtrip("Command", cmd)
    assert {k: out[k] for k in ("trace_id", "request_id", "idempotency_key", "expected_version", "run_id")} == {
        "trace_id": None,
        "request_id": None,
        "idempotency_key": None,
        "expected_version": None,
        "run_id": None,
    }
    assert out["body"] == ("AwaitWorkflowResult", {"wait": True})


@pytest.mark.parametrize("kind", _union("HistoryEvent", "attributes"))
def test_history_event_round_trips_with_each_attribute_type(kind):
    event = _event(3, kind)
    assert _roundtrip("HistoryEvent", event)["attributes"][0] == kind


def test_workflow_task_round_trips_with_its_events():
    kinds = _union("HistoryEvent", "attributes")
    events = [_event(i + 1, kind) for i, kind in enumerate(kinds)]
    task = {
        "workflow_id": WF,
        "run_id": RUN,
        "workflow_type": "OrderFulfilment",
        "task_queue": "orders",
        "scheduled_seq": 9,
        "attempt": 2,
        "full_history": True,
        "events": events,
        "trace_id": None,
    }
    out = _roundtrip("WorkflowTask", task)
    assert [e["attributes"][0] for e in out["events"]] == kinds
    assert [e["seq"] for e in out["events"]] == list(range(1, len(kinds) + 1))


def test_activity_task_round_trips():
    task = {
        "workflow_id": WF,
        "run_id": RUN,
        "workflow_type": "OrderFulfilment",
        "activity_id": "2",
        "activity_type": "charge",
        "task_queue": "payments",
        "input": b"[1]",
        "attempt": 3,
        "scheduled_seq": 5,
        "scheduled_time_ms": 1_700_000_000_123,
        "idempotency_key": idempotency_key(WF, RUN, "2"),
        "heartbeat_details": b'{"page":4}',
        "start_to_close_timeout_ms": 30_000,
        "heartbeat_timeout_ms": None,
        "trace_id": "t",
    }
    assert _roundtrip("ActivityTask", task)["idempotency_key"] == f"{WF}/{RUN}/2"


@pytest.mark.parametrize(
    "status, result, failure",
    [("ok", None, None), ("completed", b"108", None), ("failed", None, FAILURE), ("already_started", None, None)],
)
def test_reply_round_trips(status, result, failure):
    reply = {
        "request_id": "req-1",
        "workflow_id": WF,
        "run_id": RUN,
        "status": status,
        "message": "m",
        "history_offset": 41,
        "result": result,
        "failure": failure,
    }
    out = _roundtrip("Reply", reply)
    assert (out["status"], out["result"], out["failure"]) == (status, result, failure)


def test_workflow_state_round_trips():
    state = {
        "workflow_id": WF,
        "run_id": RUN,
        "workflow_type": "OrderFulfilment",
        "task_queue": "orders",
        "status": "running",
        "start_time_ms": 1,
        "close_time_ms": None,
        "next_seq": 12,
        "wt_scheduled_seq": 11,
        "wt_attempt": 2,
        "wt_last_completed_seq": 8,
        "wt_needed": True,
        "wt_failure": FAILURE,
        "wt_failure_cause": "non_determinism",
        "pending_activities": [
            {"activity_id": "2", "activity_type": "charge", "scheduled_seq": 5, "attempt": 1, "task_queue": "payments"},
            {"activity_id": "3", "activity_type": "ship", "scheduled_seq": 6, "attempt": 4, "task_queue": "shipping"},
        ],
        "recent_requests": [{"request_id": "req-1", "run_id": RUN, "status": "ok", "message": ""}],
        "result": None,
        "failure": None,
        "result_waiters": ["req-9", "req-10"],
    }
    out = _roundtrip("WorkflowState", state)
    assert [a["activity_id"] for a in out["pending_activities"]] == ["2", "3"]


def test_dead_letter_round_trips_arbitrary_bytes():
    dead = {
        "origin_topic": "kadence.commands",
        "origin_partition": 3,
        "origin_offset": 2**40,
        "key": WF.encode(),
        "value": bytes(range(256)),
        "reason": "bad magic byte",
        "error_type": "SchemaError",
        "component": "history-processor",
        "timestamp_ms": 7,
    }
    assert _roundtrip("DeadLetter", dead)["value"] == bytes(range(256))
    tombstone = {**dead, "key": None, "value": None}
    assert _roundtrip("DeadLetter", tombstone)["value"] is None


def test_timer_record_round_trips():
    timer = {
        "workflow_id": WF,
        "run_id": RUN,
        "timer_id": "activity-2-start_to_close",
        "fire_at_ms": 1_700_000_030_000,
        "kind": "activity_timeout",
    }
    assert _roundtrip("TimerRecord", timer)["fire_at_ms"] == 1_700_000_030_000


@pytest.mark.parametrize("record", sorted(SCHEMAS))
def test_every_record_encodes_with_only_its_required_fields(record):
    """Fields with a default may be left out by the writer; the reader gets the defaults, with
    the field's type (bytes stay bytes), and can write the record again."""
    full = Samples(load_schema_set()).variants(SCHEMAS[record], record)[0]
    minimal = {f["name"]: full[f["name"]] for f in SCHEMAS[record]["fields"] if "default" not in f}
    out = _roundtrip(record, minimal)
    for f in SCHEMAS[record]["fields"]:
        if "default" in f:
            assert out[f["name"]] == _default(f), f["name"]
            assert type(out[f["name"]]) is type(_default(f)), f"{record}.{f['name']}: {out[f['name']]!r}"
    assert serde.decode(record, serde.encode(record, out)) == out


def test_history_key_is_unique_per_event():
    assert history_key(WF, RUN, 7) == f"{WF}/{RUN}/7"


# ---------------------------------------------------------------- bad values are SchemaErrors


def _required_fields():
    for schema in load_schema_set():
        for f in schema["fields"]:
            if "default" not in f:
                yield schema["name"], f["name"]


VALID = {
    "Command": command(WF, "StartWorkflow", COMMAND_BODIES["StartWorkflow"], request_id="r"),
    "HistoryEvent": _event(1, "WorkflowExecutionStarted"),
    "Failure": FAILURE,
    "TimerRecord": {"workflow_id": WF, "run_id": RUN, "timer_id": "t", "fire_at_ms": 1},
}


@pytest.mark.parametrize("record, field", [(r, f) for r, f in _required_fields() if r in VALID])
def test_missing_required_field_raises_schema_error(record, field):
    value = {k: v for k, v in VALID[record].items() if k != field}
    with pytest.raises(SchemaError) as info:
        serde.encode(record, value)
    assert field in str(info.value) and record in str(info.value)


@pytest.mark.parametrize("body_type", _union("Command", "body"))
def test_missing_required_field_inside_a_command_body_raises_schema_error(body_type):
    required = [f["name"] for f in SCHEMAS[body_type]["fields"] if "default" not in f]
    for field in required:
        body = {k: v for k, v in _sample(body_type).items() if k != field}
        with pytest.raises(SchemaError):
            serde.encode("Command", command(WF, body_type, body, request_id="r"))


@pytest.mark.parametrize(
    "label, value",
    [
        ("string for long", {"workflow_id": WF, "run_id": RUN, "timer_id": "t", "fire_at_ms": "soon"}),
        ("str for bytes", {"workflow_id": WF, "run_id": RUN, "timer_id": "t", "fire_at_ms": 1, "kind": b"user"}),
        ("None for string", {"workflow_id": None, "run_id": RUN, "timer_id": "t", "fire_at_ms": 1}),
        ("long out of range", {"workflow_id": WF, "run_id": RUN, "timer_id": "t", "fire_at_ms": 2**70}),
        ("not a dict", None),
    ],
)
def test_wrongly_typed_value_raises_schema_error(label, value):
    with pytest.raises(SchemaError):
        serde.encode("TimerRecord", value)


def test_unknown_union_branch_raises_schema_error():
    with pytest.raises(SchemaError) as info:
        serde.encode("Command", command(WF, "NoSuchCommand", {"name": "go"}, request_id="r"))
    assert "NoSuchCommand" in str(info.value)


def test_schema_error_is_a_kadence_error():
    assert issubclass(SchemaError, KadenceError)


def test_the_version_is_the_prefix_alone():
    """Version 12 dropped the envelopes' ``schema_version`` field (it repeated the prefix): a
    record of version 11 that carries it decodes without it, and is written again as 12."""
    assert not [s["name"] for s in load_schema_set() for f in s["fields"] if f["name"] == "schema_version"]
    old = load_schema_set(11)
    cmd = command(WF, "AwaitWorkflowResult", {"wait": False}, request_id="r")
    data = write(parse_set(old), "Command", {**cmd, "schema_version": 11}, 11)
    back = serde.decode("Command", data)
    assert "schema_version" not in back and back["request_id"] == "r"
    assert serde.encode("Command", back)[:2] == bytes((serde.MAGIC, CURRENT_VERSION))
