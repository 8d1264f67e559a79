"""The reply consumer's stall check (``EngineClient._check_replies``) without a broker.

A clean-clone CI run replaced a healthy reply consumer: its partition had been quiet for
seconds, a describe reply landed on it, and the check read the watermarks in the moment
before the next fetch delivered it. Records written just now are not a stall; records that
stay past the position for ``replies_stall_s`` are.
"""

import threading
import types

from kadence.topics import engine_client as ec


class Clock:
    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now


class Watermarks:
    """Answers get_watermark_offsets from a dict (partition -> high)."""

    def __init__(self, highs):
        self.highs = highs

    def get_watermark_offsets(self, tp, timeout=None):
        return 0, self.highs[tp.partition]

    def assign(self, tps):
        pass

    def close(self):
        pass


def _client(monkeypatch, clock, highs, pos):
    monkeypatch.setattr(ec, "time", types.SimpleNamespace(monotonic=clock.monotonic, sleep=lambda s: None))
    c = object.__new__(ec.EngineClient)
    c.replies_stall_s = 1.0
    c._reply_partitions = sorted(pos)
    c._reply_pos = dict(pos)
    c._reply_seen = {p: clock.now for p in pos}
    c._replaced_at_highs = None
    c._behind = {}
    c._next_reply_check = 0.0
    c.reply_consumer_replacements = 0
    c._closed = threading.Event()
    c._replies_lock = threading.Lock()
    c.topics = types.SimpleNamespace(replies="ns.replies")
    c._replies = Watermarks(highs)
    c._reply_consumer_conf = lambda: {}
    fresh = []  # the consumers made to replace it
    c._consumer_factory = lambda conf: fresh.append(Watermarks(highs)) or fresh[-1]
    return c, fresh


def _tick(c, clock, dt):
    clock.now += dt
    c._next_reply_check = 0.0
    c._check_replies()


def test_a_reply_written_to_a_long_quiet_partition_is_not_a_stall(monkeypatch):
    clock = Clock()
    highs = {0: 2, 1: 2}
    c, fresh = _client(monkeypatch, clock, highs, {0: 1, 1: 1})
    _tick(c, clock, 5.0)  # quiet for 5 s, nothing past the positions but the markers
    highs[1] = 4  # a reply and its marker land on partition 1
    _tick(c, clock, 0.01)
    assert c.reply_consumer_replacements == 0 and not fresh
    c._reply_pos[1] = 3  # the next fetch delivers it
    c._reply_seen[1] = clock.now
    _tick(c, clock, 0.3)
    _tick(c, clock, 2.0)
    assert c.reply_consumer_replacements == 0 and not fresh


def test_records_left_past_the_position_for_the_stall_time_replace_the_consumer(monkeypatch):
    clock = Clock()
    highs = {0: 2, 1: 2}
    c, fresh = _client(monkeypatch, clock, highs, {0: 1, 1: 1})
    _tick(c, clock, 5.0)
    highs[1] = 4
    _tick(c, clock, 0.01)  # first seen behind
    _tick(c, clock, 0.5)
    assert c.reply_consumer_replacements == 0
    _tick(c, clock, 0.6)  # behind for 1.1 s >= replies_stall_s: the consumer is deaf
    assert c.reply_consumer_replacements == 1 and len(fresh) == 1
    _tick(c, clock, 5.0)  # nothing new on the topic: a second consumer would find nothing either
    assert c.reply_consumer_replacements == 1


def test_new_records_behind_records_that_were_read_restart_the_clock(monkeypatch):
    """Behind, caught up, behind again: the stall time counts from the new records."""
    clock = Clock()
    highs = {0: 4}
    c, _fresh = _client(monkeypatch, clock, highs, {0: 1})
    _tick(c, clock, 5.0)  # first seen behind (high 4)
    c._reply_pos[0] = 3  # read, but the partition stayed quiet otherwise (seen not refreshed)
    highs[0] = 6
    _tick(c, clock, 0.9)
    assert c.reply_consumer_replacements == 0
    _tick(c, clock, 0.5)  # 0.5 s behind the new records only
    assert c.reply_consumer_replacements == 0
    _tick(c, clock, 0.6)
    assert c.reply_consumer_replacements == 1
