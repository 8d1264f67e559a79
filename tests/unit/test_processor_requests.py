"""Requests the processor saves: it pauses fetching while it processes a batch (decision 0028)
and writes its replies to one partition (decision 0029).

The calls into the consumer are what matters here (the real broker runs the whole engine with
the pause in every integration and chaos test): which partitions are paused, that the resume
wakes the fetcher with a seek to where the consumer stands, and that a rewind's seeks win."""

from typing import ClassVar

from confluent_kafka import TopicPartition

from kadence.processors import history_processor
from kadence.processors.history_processor import HistoryProcessor, ProcessorConfig, reply_partition
from kadence.topics import KafkaConfig


class RecordingConsumer:
    def __init__(self, assignment):
        self._assignment = assignment
        self.calls: list[tuple] = []

    def assignment(self):
        return list(self._assignment)

    def pause(self, tps):
        self.calls.append(("pause", sorted(tp.partition for tp in tps)))

    def resume(self, tps):
        self.calls.append(("resume", sorted(tp.partition for tp in tps)))

    def position(self, tps):
        # partition 2 has consumed nothing yet: no position to seek to
        return [
            TopicPartition(tp.topic, tp.partition, -1001 if tp.partition == 2 else 100 + tp.partition, leader_epoch=7)
            for tp in tps
        ]

    def seek(self, tp):
        self.calls.append(("seek", tp.partition, tp.offset, tp.leader_epoch))

    def committed(self, tps, timeout=None):
        return [TopicPartition(tp.topic, tp.partition, 50 + tp.partition) for tp in tps]


class NoBuilds:  # the build defaults' consumer is not part of this (and would try to connect)
    def __init__(self, *args):
        self.defaults = {}


def processor(monkeypatch, max_batch=500):
    monkeypatch.setattr(history_processor, "BuildDefaults", NoBuilds)
    proc = HistoryProcessor(
        ProcessorConfig(
            kafka=KafkaConfig(bootstrap="127.0.0.1:9"), instance_id="t", max_batch=max_batch, build_backlog_interval_s=0
        )
    )
    proc._consumer = RecordingConsumer([TopicPartition("ns.commands", p) for p in (0, 1, 2)])
    return proc


def test_a_batch_pauses_the_partitions_it_read_and_the_resume_seeks_where_they_stood(monkeypatch):
    proc = processor(monkeypatch)
    proc._pause_fetching(10)
    proc._resume_fetching()
    assert proc._consumer.calls == [
        # partition 2 has returned nothing since its assignment: no position, it is not paused
        ("pause", [0, 1]),
        ("resume", [0, 1]),
        # without the leader epoch: no validation request
        ("seek", 0, 100, None),
        ("seek", 1, 101, None),
    ]
    proc._resume_fetching()  # the second call (the loop's, after the commit's) does nothing
    assert len(proc._consumer.calls) == 4


def test_no_pause_for_a_full_batch_or_for_deadlines_alone(monkeypatch):
    proc = processor(monkeypatch, max_batch=50)
    proc._pause_fetching(50)  # more commands are waiting in the fetch queue: keep them
    proc._pause_fetching(0)  # only deadlines fired
    proc._resume_fetching()
    assert proc._consumer.calls == []


def test_a_rewind_resumes_without_the_waking_seek_and_its_own_seeks_stand(monkeypatch):
    proc = processor(monkeypatch)
    proc._pause_fetching(3)
    proc._rewind()
    proc._resume_fetching()
    assert proc._consumer.calls == [
        ("pause", [0, 1]),
        ("resume", [0, 1]),
        ("seek", 0, 50, None),
        ("seek", 1, 51, None),
        ("seek", 2, 52, None),
    ]


def test_an_instance_replies_on_one_stable_partition_and_instances_spread():
    assert reply_partition("p0", 4) == reply_partition("p0", 4)
    assert {reply_partition(f"p{i}", 8) for i in range(64)} == set(range(8))
    assert all(0 <= reply_partition(f"host-{i}", 3) < 3 for i in range(50))


class RecordingProducer:
    def __init__(self):
        self.calls: list[str] = []

    def begin_transaction(self):
        self.calls.append("begin")

    def abort_transaction(self, timeout=None):
        self.calls.append("abort")


def test_a_batch_that_needs_a_topic_while_the_broker_is_away_is_aborted_and_read_again(monkeypatch):
    """A chaos seed's processor exited on `cannot list topics` when a batch's task went to a queue
    it had not seen yet during a broker restart; the batch is now dropped and read again."""
    from kadence.processors.effects import BatchView, Outbox
    from kadence.processors.store import MemoryShardStore
    from kadence.topics.errors import BrokerUnavailableError

    proc = processor(monkeypatch)
    proc._producer = RecordingProducer()
    proc._stores[0] = MemoryShardStore(0)
    out = Outbox()
    out.tasks.append(("activity", "new-queue", {"workflow_id": "wf"}))

    def unreachable(queue):
        raise BrokerUnavailableError("cannot list topics at 127.0.0.1:9: transport failure")

    monkeypatch.setattr(proc.topics, "ensure_queue", unreachable)
    rewound = []
    monkeypatch.setattr(proc, "_rewind", lambda: rewound.append(True))
    views = {0: BatchView(proc._stores[0], {})}
    assert proc._commit([], views, {0: out}, [], {(proc.topics.commands, 0): 5}) is False
    assert proc._producer.calls == ["begin", "abort"] and rewound == [True]


class CapturingConsumer:
    """Takes the configuration a loop makes its consumer with, and connects to nothing."""

    confs: ClassVar[list] = []

    def __init__(self, conf):
        CapturingConsumer.confs.append(conf)

    def subscribe(self, *args, **kwargs):
        pass


def test_the_consumers_that_pause_keep_a_short_fetch_wait(monkeypatch):
    """The processor's and the timer service's consumers pause and resume partitions as they go: a
    fetch that left without a paused partition would hold its next fetch back for the whole wait
    (p99 565 ms at 500 ms), so they keep ``PAUSING_FETCH_WAIT_MS`` whatever
    ``KADENCE_FETCH_WAIT_MS`` says; other consumers take the setting."""
    from kadence.processors import timer_service
    from kadence.processors.timer_config import TimerConfig
    from kadence.processors.timer_service import TimerService
    from kadence.topics.config import PAUSING_FETCH_WAIT_MS

    CapturingConsumer.confs = []
    monkeypatch.setattr(history_processor, "Consumer", CapturingConsumer)
    monkeypatch.setattr(timer_service, "Consumer", CapturingConsumer)
    kafka = KafkaConfig(bootstrap="127.0.0.1:9", fetch_wait_ms=500)
    processor(monkeypatch)._make_consumer()
    TimerService(TimerConfig(kafka=kafka))._make_consumer()
    assert [c["fetch.wait.max.ms"] for c in CapturingConsumer.confs] == [PAUSING_FETCH_WAIT_MS] * 2
    assert kafka.waiting_consumer("g")["fetch.wait.max.ms"] == 500
