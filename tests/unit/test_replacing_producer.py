"""The engine client's producer is replaced only when it is wedged: records older than the
stall limit while the broker names every leader; each record is reported once."""

from types import SimpleNamespace

from kadence.topics.replacing_producer import ReplacingProducer


class FakeProducer:
    """Queues records; ``deliver()`` reports them; ``leader`` is what metadata names."""

    leader = 0

    def __init__(self, conf):
        self.queued = []
        self.timestamps = []
        self.purged = False

    def produce(self, topic, value, key, on_delivery=None, timestamp=0):
        self.queued.append((topic, value, key, on_delivery))
        self.timestamps.append(timestamp)

    def deliver(self):
        for topic, value, key, cb in self.queued:
            cb(None, SimpleNamespace(topic=topic, value=value, key=key))
        self.queued = []

    def poll(self, timeout=0):
        return 0

    def list_topics(self, topic=None, timeout=-1):
        part = SimpleNamespace(leader=type(self).leader, error=None)
        return SimpleNamespace(topics={topic: SimpleNamespace(error=None, partitions={0: part, 1: part})})

    def purge(self, **kw):
        self.purged = True

    def flush(self, timeout):
        return 0


def _producer(monkeypatch, clock):
    monkeypatch.setattr("kadence.topics.replacing_producer.time.monotonic", lambda: clock[0])
    made = []

    def factory(conf):
        made.append(FakeProducer(conf))
        return made[-1]

    return ReplacingProducer({}, stall_s=10.0, factory=factory), made


def test_a_wedged_producer_is_replaced_and_its_records_are_produced_again_in_order(monkeypatch):
    clock = [100.0]
    producer, made = _producer(monkeypatch, clock)
    reports = []
    for i in range(3):
        producer.produce("cmds", f"v{i}".encode(), b"k", on_delivery=lambda err, msg: reports.append(msg.value))
    clock[0] += 5
    assert producer.watch() is False  # younger than the stall limit
    clock[0] += 6
    assert producer.watch() is True
    assert len(made) == 2 and made[0].purged and producer.replacements == 1
    assert [v for _t, v, _k, _cb in made[1].queued] == [b"v0", b"v1", b"v2"]
    made[0].deliver()  # the old producer's late reports are ignored...
    made[1].deliver()  # ...the new one's are passed on, once each
    assert reports == [b"v0", b"v1", b"v2"] and producer.outstanding() == 0


def test_records_waiting_for_a_leader_do_not_replace_the_producer(monkeypatch):
    clock = [100.0]
    producer, made = _producer(monkeypatch, clock)
    monkeypatch.setattr(FakeProducer, "leader", -1)
    producer.produce("cmds", b"v", b"k")
    clock[0] += 60
    assert producer.watch() is False and len(made) == 1


def test_a_producer_that_delivers_is_left_alone(monkeypatch):
    clock = [100.0]
    producer, made = _producer(monkeypatch, clock)
    for _ in range(5):
        producer.produce("cmds", b"v", b"k")
        clock[0] += 4
        made[0].deliver()
        assert producer.watch() is False
    assert len(made) == 1 and producer.outstanding() == 0


def test_a_wedged_producer_that_gets_no_metadata_is_replaced_when_another_client_gets_it(monkeypatch):
    from confluent_kafka import KafkaError, KafkaException

    clock = [100.0]
    monkeypatch.setattr("kadence.topics.replacing_producer.time.monotonic", lambda: clock[0])
    made, probes = [], []

    class Deaf(FakeProducer):
        def list_topics(self, topic=None, timeout=-1):
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "wedged"))

    def factory(conf):
        made.append(Deaf(conf) if not made else FakeProducer(conf))
        return made[-1]

    def probe_factory(conf):
        probes.append(FakeProducer(conf))
        return probes[-1]

    producer = ReplacingProducer({}, stall_s=10.0, factory=factory, probe_factory=probe_factory)
    producer.produce("cmds", b"v", b"k")
    clock[0] += 11
    assert producer.watch() is True and len(probes) == 1 and len(made) == 2
    assert [v for _t, v, _k, _cb in made[1].queued] == [b"v"]


def test_no_replacement_when_no_client_gets_metadata(monkeypatch):
    from confluent_kafka import KafkaError, KafkaException

    clock = [100.0]
    monkeypatch.setattr("kadence.topics.replacing_producer.time.monotonic", lambda: clock[0])

    class Deaf(FakeProducer):
        def list_topics(self, topic=None, timeout=-1):
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down"))

    made = []
    producer = ReplacingProducer(
        {}, stall_s=10.0, factory=lambda conf: made.append(Deaf(conf)) or made[-1], probe_factory=Deaf
    )
    producer.produce("cmds", b"v", b"k")
    clock[0] += 60
    assert producer.watch() is False and len(made) == 1


def test_a_record_produced_again_keeps_its_timestamp(monkeypatch):
    # the timer service stamps each output with its due time (a re-enqueued timer keeps it)
    clock = [100.0]
    producer, made = _producer(monkeypatch, clock)
    producer.produce("timers", b"a", b"k", timestamp=1_700_000_000_123)
    producer.produce("timers", b"b", b"k")
    clock[0] += 11
    assert producer.watch() is True
    assert made[0].timestamps == made[1].timestamps == [1_700_000_000_123, 0]
