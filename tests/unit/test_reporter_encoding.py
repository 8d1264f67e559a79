"""The activity reporter and a command that does not encode: an eager workflow task that cannot
be encoded is dropped and the result sent without it (the engine schedules an ordinary workflow
task); any other encoding error aborts the transaction before it goes up, so the next batch does
not meet "Operation not valid in state InTransaction" (found when updates first ran eagerly)."""

from __future__ import annotations

import pytest

from kadence._reporter import ActivityReporter
from kadence.topics import KafkaConfig, SchemaError, serde
from kadence.topics.catalogue import Catalogue
from kadence.topics.transactions import TxnWatchdog


class FakeProducer:
    def __init__(self):
        self.calls: list[str] = []
        self.values: list[bytes] = []

    def begin_transaction(self):
        self.calls.append("begin")

    def produce(self, topic, value, key):
        self.values.append(value)

    def commit_transaction(self, timeout):
        self.calls.append("commit")

    def abort_transaction(self, timeout):
        self.calls.append("abort")


class Msg:
    def topic(self):
        return "t"

    def partition(self):
        return 0

    def offset(self):
        return 3


class FakeConsumer:
    group_metadata = None

    def commit_offsets(self, finishing):
        return []

    def reported(self, msg):
        pass


def _reporter(producer: FakeProducer) -> ActivityReporter:
    config = KafkaConfig(bootstrap="127.0.0.1:1", namespace="unit")
    rep = ActivityReporter(
        config=config, topics=Catalogue(config), consumer=FakeConsumer(), identity="w1", on_unsendable=lambda *a: None
    )
    rep._producer = producer
    rep._watchdog = TxnWatchdog(60.0, lambda blocked: None)
    return rep


def _completed(eager_commands: list) -> dict:
    return {
        "activity_id": "1",
        "scheduled_seq": 5,
        "attempt": 1,
        "identity": "w1",
        "result": b"1",
        "eager_workflow_task": {
            "base_scheduled_seq": 7,
            "workflow_time_ms": 0,
            "build_id": None,
            "base_request_id": None,
            "commands": eager_commands,
        },
    }


def test_an_eager_task_that_does_not_encode_is_left_out_and_the_result_goes():
    producer = FakeProducer()
    rep = _reporter(producer)
    bad = [("NoSuchCommand", {})]
    assert rep._commit([("wf-1", "run-1", "RespondActivityTaskCompleted", _completed(bad), "req-1", None, Msg())], 0)
    assert producer.calls == ["begin", "commit"]
    (value,) = producer.values
    _btype, body = serde.decode("Command", value)["body"]
    assert body["result"] == b"1" and body["eager_workflow_task"] is None


def test_another_encoding_error_aborts_the_transaction_before_it_goes_up():
    producer = FakeProducer()
    rep = _reporter(producer)
    with pytest.raises(SchemaError):
        rep._commit([("wf-1", "run-1", "RespondActivityTaskFailed", {"nonsense": 1}, "req-1", None, Msg())], 0)
    assert producer.calls == ["begin", "abort"]
