"""``Catalogue.apply`` tells a broker that did not answer (retry: ``BrokerUnavailableError``) from
one that refused the topic (``TopicError``): a worker or bridge that met a broker restart while it
created its queue's topics exited on a create-topics timeout, which it would have retried."""

from __future__ import annotations

from concurrent.futures import Future
from typing import ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException

from kadence.topics import BrokerUnavailableError, Catalogue, KafkaConfig, TopicError, TopicSpec


class _Metadata:
    topics: ClassVar[dict] = {}


class _Admin:
    """An admin client whose create-topics result for every topic is ``error``."""

    def __init__(self, error: KafkaError):
        self.error = error
        self.created: list[str] = []

    def list_topics(self, timeout=None):
        return _Metadata()

    def create_topics(self, new_topics, **_kw):
        out = {}
        for t in new_topics:
            self.created.append(t.topic)
            fut: Future = Future()
            fut.set_exception(KafkaException(self.error))
            out[t.topic] = fut
        return out


def _catalogue(monkeypatch, error: KafkaError) -> Catalogue:
    catalogue = Catalogue(KafkaConfig(bootstrap="127.0.0.1:1", namespace="n"))
    admin = _Admin(error)
    monkeypatch.setattr(catalogue, "admin", lambda: admin)
    return catalogue


@pytest.mark.parametrize(
    "code", [KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_CONTROLLER, KafkaError._TRANSPORT]
)
def test_a_create_the_broker_did_not_answer_is_broker_unavailable(monkeypatch, code):
    with pytest.raises(BrokerUnavailableError, match="cannot create topic n.x"):
        _catalogue(monkeypatch, KafkaError(code)).apply([TopicSpec("n.x", 1)])


@pytest.mark.parametrize(
    "code", [KafkaError.POLICY_VIOLATION, KafkaError.INVALID_CONFIG, KafkaError.INVALID_REPLICATION_FACTOR]
)
def test_a_create_the_broker_refused_is_a_topic_error(monkeypatch, code):
    with pytest.raises(TopicError, match="cannot create topic n.x") as info:
        _catalogue(monkeypatch, KafkaError(code)).apply([TopicSpec("n.x", 1)])
    assert not isinstance(info.value, BrokerUnavailableError)


def test_a_namespace_made_before_concurrency_limits_and_streams_gets_them_partitioned_as_its_commands():
    from kadence.topics import Catalogue, KafkaConfig

    cat = Catalogue(KafkaConfig(bootstrap="unused:1", namespace="old", partitions=4))
    older = {cat.commands: 12, cat.history: 12, cat.state: 12}
    assert [(s.name, s.partitions) for s in cat.late_specs(older)] == [("old.concurrency", 12), ("old.streams", 12)]
    assert [s.name for s in cat.late_specs({**older, cat.concurrency: 12})] == ["old.streams"]
    assert cat.late_specs({**older, cat.concurrency: 12, cat.streams: 3}) == []  # as it is, whatever its count


def test_a_topic_the_answering_broker_does_not_list_yet_is_looked_for_again(monkeypatch):
    """A cluster's brokers learn of a creation one by one: a worker on three nodes stopped with
    "topics missing" for its queue's topic, created a moment before, that the broker it asked did
    not list yet."""
    catalogue = Catalogue(KafkaConfig(bootstrap="127.0.0.1:1", namespace="n"))
    answers = iter([{}, {"n.other": 1}, {"n.tasks": 4}])
    monkeypatch.setattr(catalogue, "existing", lambda admin=None, timeout=10.0: next(answers))
    assert catalogue.partitions_of("n.tasks", admin=object()) == 4  # type: ignore[arg-type]


def test_a_topic_that_stays_missing_is_still_a_topic_error(monkeypatch):
    catalogue = Catalogue(KafkaConfig(bootstrap="127.0.0.1:1", namespace="n"))
    monkeypatch.setattr(catalogue, "existing", lambda admin=None, timeout=10.0: {})
    monkeypatch.setattr(catalogue, "_metadata", lambda *a, **k: _Metadata())
    with pytest.raises(TopicError, match="topics missing: n.tasks"):
        catalogue.partitions_of("n.tasks", admin=object(), settle=0.3)  # type: ignore[arg-type]
