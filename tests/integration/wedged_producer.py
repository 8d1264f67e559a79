"""A stand-in for librdkafka #5430's wedged producer, shared by the tests of every component that
must replace one (the timer service, the bridges, the archiver)."""

from __future__ import annotations

from confluent_kafka import Producer


class BlackHoleProducer:
    """Takes records and never sends them, as the wedged producer did (``make soak`` met it: after
    a broker restart and a 30 s pause the timer service's 100 FireTimer records stayed undelivered
    for five minutes). Metadata is answered by a real client, as the wedged one's was; ``flush``
    returns at once with every record it took still undelivered (the real one waits its timeout
    first)."""

    def __init__(self, conf: dict):
        self._real = Producer(conf)
        self.taken = 0
        self.purged = False

    def produce(self, *_args, **_kw) -> None:
        self.taken += 1

    def poll(self, _timeout: float = 0) -> int:
        return 0

    def flush(self, _timeout: float = -1) -> int:
        return 0 if self.purged else self.taken

    def list_topics(self, topic=None, timeout=-1):
        return self._real.list_topics(topic, timeout=timeout)

    def purge(self, **_kw) -> None:
        self.purged = True


def first_wedged() -> tuple:
    """A producer factory whose first producer is a ``BlackHoleProducer`` and the rest real
    ones, and the list of the producers it made."""
    made: list = []

    def factory(conf: dict):
        made.append(BlackHoleProducer(conf) if not made else Producer(conf))
        return made[-1]

    return factory, made
