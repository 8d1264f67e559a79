"""The bridges' and the archiver's producer: a batch is acknowledged as a whole or reported as
not, and a flush that leaves records undelivered retires the producer (librdkafka #5430's wedge:
a retry through it would only queue behind the stuck records)."""

from __future__ import annotations

from kadence.topics.batch_producer import BatchProducer


class _Err:
    def __init__(self, text: str):
        self.text = text

    def str(self) -> str:
        return self.text


class _FakeProducer:
    """Delivers (``ok``), fails each record (``fail``) or keeps them all (``wedged``)."""

    def __init__(self, mode: str, full_once: bool = False):
        self.mode, self.full_once = mode, full_once
        self.sent: list = []
        self.queued: list = []
        self.purged = False
        self.polls = 0

    def produce(self, topic, value, key, on_delivery=None, **kw):
        if self.full_once:
            self.full_once = False
            raise BufferError("queue full")
        self.queued.append((topic, value, key, kw, on_delivery))

    def poll(self, _timeout=0):
        self.polls += 1
        return 0

    def flush(self, _timeout=-1):
        if self.mode == "wedged":
            return 0 if self.purged else len(self.queued)
        for topic, value, key, kw, cb in self.queued:
            if self.mode == "ok":
                self.sent.append((topic, value, key, kw))
                cb(None, None)
            else:
                cb(_Err("Broker: Message size too large"), None)
        self.queued.clear()
        return 0

    def purge(self, **_kw):
        self.purged = True


def _factory(*modes):
    made: list = []

    def make(_conf):
        made.append(_FakeProducer(modes[len(made)]))
        return made[-1]

    return make, made


def test_an_acknowledged_batch_flushes_to_none_and_keeps_its_partition():
    make, made = _factory("ok")
    producer = BatchProducer({}, who="test", factory=make)
    producer.produce("t", b"v1", b"k1")
    producer.produce("t", None, b"k2", partition=3)
    assert producer.flush(30) is None
    assert made[0].sent == [("t", b"v1", b"k1", {}), ("t", None, b"k2", {"partition": 3})]
    assert producer.replacements == 0


def test_a_full_queue_is_waited_out_not_dropped():
    producer = BatchProducer({}, who="test", factory=lambda _c: _FakeProducer("ok", full_once=True))
    producer.produce("t", b"v", b"k")
    assert producer._producer.polls == 1
    assert producer.flush(30) is None and len(producer._producer.sent) == 1


def test_a_wedged_producer_is_retired_and_the_retry_goes_through_a_new_one():
    make, made = _factory("wedged", "ok")
    producer = BatchProducer({}, who="test", factory=make)
    for i in range(3):
        producer.produce("t", b"v", str(i).encode())
    failure = producer.flush(30)
    assert failure == "3 records not acknowledged within 30 s"
    assert len(made) == 2 and made[0].purged and producer.replacements == 1
    for i in range(3):  # the caller produces the batch again
        producer.produce("t", b"v", str(i).encode())
    assert producer.flush(30) is None
    assert [k for _t, _v, k, _kw in made[1].sent] == [b"0", b"1", b"2"]
    assert made[0].queued and len(made[0].queued) == 3  # nothing more went to the retired one


def test_delivery_errors_fail_the_batch_without_retiring_a_producer_that_answers():
    make, made = _factory("fail", "ok")
    producer = BatchProducer({}, who="test", factory=make)
    producer.produce("t", b"v", b"k")
    producer.produce("t", b"v", b"k2")
    assert producer.flush(30) == "2 records not acknowledged (Broker: Message size too large)"
    assert len(made) == 1 and producer.replacements == 0
    made[0].mode = "ok"  # the next batch starts with no error carried over
    producer.produce("t", b"v", b"k3")
    assert producer.flush(30) is None


def test_a_retired_producers_late_report_does_not_fail_the_next_batch():
    make, made = _factory("wedged", "ok")
    producer = BatchProducer({}, who="test", factory=make)
    producer.produce("t", b"v", b"k")
    assert producer.flush(30) is not None
    late_callback = made[0].queued[0][4]
    producer.produce("t", b"v", b"k")
    late_callback(_Err("Local: Purged in queue"), None)  # the purge's report, served late
    assert producer.flush(30) is None
