"""``read_range``: the one bounded partition reader (restore, history reads, scans)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, TopicPartition

from kadence.topics import BrokerUnavailableError
from kadence.topics import scan as scan_module
from kadence.topics.scan import read_range


class Msg:
    def __init__(self, offset, error=None):
        self._offset, self._error = offset, error

    def offset(self):
        return self._offset

    def error(self):
        return self._error


class Err:
    def __init__(self, code):
        self._code = code

    def code(self):
        return self._code

    def str(self):
        return f"error {self._code}"


class FakeConsumer:
    """Delivers ``batches`` one per poll; ``position`` follows what was delivered, plus the
    markers' offsets the broker skips (``skip_to``: position after each batch)."""

    def __init__(self, batches, positions):
        self.batches, self.positions = list(batches), list(positions)
        self.pos = None
        self.assigned = None

    def assign(self, tps):
        self.assigned = [(tp.partition, tp.offset) for tp in tps]

    def poll(self, timeout=None):
        batch = self.batches[0] if self.batches else []
        if not batch:
            if self.batches:
                self.batches.pop(0)
            return None
        return batch.pop(0)

    def consume(self, num_messages=1, timeout=None):
        out = []
        if self.batches:
            out, self.batches[0] = self.batches[0], []
            self.batches.pop(0)
        return out

    def position(self, tps):
        if self.positions:
            self.pos = self.positions.pop(0)
        return [TopicPartition(tps[0].topic, tps[0].partition, self.pos)]


def test_it_stops_on_the_position_past_the_markers_and_skips_eof_events():
    eof = Msg(0, Err(KafkaError._PARTITION_EOF))
    consumer = FakeConsumer([[Msg(10), Msg(11)], [eof, Msg(13)]], positions=[12, 15])
    got = [m.offset() for m in read_range(consumer, TopicPartition("t", 2), 10, 15)]
    assert got == [10, 11, 13]  # offsets 12 and 14: transaction markers, never delivered
    assert consumer.assigned == [(2, 10)]


def test_an_error_other_than_eof_is_broker_unavailable():
    consumer = FakeConsumer([[Msg(0, Err(KafkaError._TRANSPORT))]], positions=[0])
    with pytest.raises(BrokerUnavailableError, match="read of t\\[0\\] failed"):
        list(read_range(consumer, TopicPartition("t", 0), 0, 5))


def test_a_read_that_stops_moving_gives_up_after_the_stall_time(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(scan_module.time, "monotonic", lambda: clock[0])

    class Stuck(FakeConsumer):
        def position(self, tps):
            clock[0] += 1.0  # each round trip takes a second; nothing moves
            return [TopicPartition("t", 0, 3)]

    with pytest.raises(BrokerUnavailableError, match="stalled at offset 3 of 9 for 5s"):
        list(read_range(Stuck([], []), TopicPartition("t", 0), 3, 9, stall_s=5, what="t[0]"))


def test_a_slow_read_that_progresses_goes_on_and_reports_progress(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(scan_module.time, "monotonic", lambda: clock[0])
    reports = []

    class Slow(FakeConsumer):
        def position(self, tps):
            clock[0] += 4.0  # slower than the stall time per round, but moving
            return super().position(tps)

    consumer = Slow([[Msg(0)], [Msg(1)], [Msg(2)]], positions=[1, 2, 3])
    got = [
        m.offset() for m in read_range(consumer, TopicPartition("t", 0), 0, 3, stall_s=5, on_progress=reports.append)
    ]
    assert got == [0, 1, 2] and reports and reports[-1] <= 3
