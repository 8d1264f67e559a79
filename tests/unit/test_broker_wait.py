"""``until_broker_answers``: retries only while the broker is unreachable, and not once stopping;
``assign_at_committed``: assigns at the offsets it read itself."""

import logging
import threading

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from kadence.topics.broker_wait import assign_at_committed, committed_offsets, until_broker_answers
from kadence.topics.errors import BrokerUnavailableError, ConfigError


class Flaky:
    def __init__(self, failures: int, stop: threading.Event | None = None):
        self.failures, self.calls, self.stop = failures, 0, stop

    def __call__(self):
        self.calls += 1
        if self.calls <= self.failures:
            raise BrokerUnavailableError(f"down ({self.calls})")
        return "answered"


def test_retries_until_the_broker_answers_and_warns_each_time(monkeypatch, caplog):
    stop = threading.Event()
    waits = []
    monkeypatch.setattr(stop, "wait", lambda s: waits.append(s))
    step = Flaky(5)
    with caplog.at_level(logging.WARNING):
        assert (
            until_broker_answers(
                step, what="checking topics", who="processor p0", stop=stop, log=logging.getLogger("t")
            )
            == "answered"
        )
    assert step.calls == 6
    assert waits == [0.2, 0.4, 0.8, 1.6, 3.2]  # doubling, capped at 5 s after that
    assert len(caplog.records) == 5
    assert "processor p0: checking topics: waiting for the broker (down (1))" in caplog.records[0].getMessage()


def test_the_delay_is_capped(monkeypatch):
    stop = threading.Event()
    waits = []
    monkeypatch.setattr(stop, "wait", lambda s: waits.append(s))
    until_broker_answers(Flaky(8), what="w", who="x", stop=stop, log=logging.getLogger("t"))
    assert max(waits) == 5.0 and waits[-3:] == [5.0, 5.0, 5.0]


def test_a_stopping_component_does_not_wait():
    stop = threading.Event()
    stop.set()
    step = Flaky(1)
    with pytest.raises(BrokerUnavailableError):
        until_broker_answers(step, what="w", who="x", stop=stop, log=logging.getLogger("t"))
    assert step.calls == 1


def test_other_errors_are_not_retried():
    calls = []

    def step():
        calls.append(1)
        raise ConfigError("topics missing")

    with pytest.raises(ConfigError):
        until_broker_answers(step, what="w", who="x", stop=threading.Event(), log=logging.getLogger("t"))
    assert calls == [1]


class _Consumer:
    """``committed()`` raising the given errors in turn, then answering."""

    def __init__(self, *errors):
        self.errors = list(errors)

    def committed(self, partitions, timeout):
        if self.errors:
            raise KafkaException(self.errors.pop(0))
        return partitions


def test_committed_offsets_turns_an_unanswered_read_into_broker_unavailable():
    tps = [TopicPartition("t", 0)]
    consumer = _Consumer(KafkaError(KafkaError.NOT_COORDINATOR, "Failed to get committed offsets"))
    with pytest.raises(BrokerUnavailableError, match="committed offsets of t.commands"):
        committed_offsets(consumer, tps, 1, "t.commands")
    assert committed_offsets(consumer, tps, 1, "t.commands") == tps  # then it answers


def test_committed_offsets_lets_a_fatal_error_through_and_is_retried_by_until_broker_answers():
    fatal = KafkaError(KafkaError._FENCED, "fenced", fatal=True)
    with pytest.raises(KafkaException) as info:
        committed_offsets(_Consumer(fatal), [TopicPartition("t", 0)], 1, "t")
    assert info.value.args[0].fatal()
    stop = threading.Event()
    consumer = _Consumer(KafkaError(KafkaError._TIMED_OUT), KafkaError(KafkaError.NOT_COORDINATOR))
    stop.wait = lambda s: None
    tps = [TopicPartition("t", 1)]
    assert (
        until_broker_answers(
            lambda: committed_offsets(consumer, tps, 1, "t"), what="w", who="x", stop=stop, log=logging.getLogger("t")
        )
        == tps
    )


class _Assigning(_Consumer):
    """Answers ``committed()`` with the given offsets (after the given errors); records assigns."""

    def __init__(self, offsets: dict[int, int], *errors):
        super().__init__(*errors)
        self.offsets, self.assigned = offsets, []

    def committed(self, partitions, timeout):
        super().committed(partitions, timeout)
        return [
            TopicPartition(tp.topic, tp.partition, self.offsets.get(tp.partition, -1001), metadata="m")
            for tp in partitions
        ]

    def incremental_assign(self, partitions):
        self.assigned.append([(tp.topic, tp.partition, tp.offset) for tp in partitions])


def test_assign_at_committed_assigns_every_partition_at_an_explicit_offset():
    stop = threading.Event()
    stop.wait = lambda s: None
    consumer = _Assigning({0: 17}, KafkaError(KafkaError.NOT_COORDINATOR, "Failed to get committed offsets"))
    read = assign_at_committed(
        consumer,
        [TopicPartition("t", 0), TopicPartition("t", 1)],
        timeout=1,
        what="t",
        who="worker w",
        stop=stop,
        log=logging.getLogger("t"),
    )
    # one assignment, after the refused read was retried; nothing left for librdkafka to query
    # (a negative offset other than BEGINNING would be: INVALID becomes STORED, a query)
    assert consumer.assigned == [[("t", 0, 17), ("t", 1, OFFSET_BEGINNING)]]
    assert [(tp.partition, tp.offset, tp.metadata) for tp in read] == [(0, 17, "m"), (1, -1001, "m")]


def test_assign_at_committed_assigns_nothing_once_stopping():
    stop = threading.Event()
    stop.set()
    consumer = _Assigning({}, KafkaError(KafkaError.NOT_COORDINATOR))
    with pytest.raises(BrokerUnavailableError):
        assign_at_committed(
            consumer, [TopicPartition("t", 0)], timeout=1, what="t", who="x", stop=stop, log=logging.getLogger("t")
        )
    assert consumer.assigned == []
