"""init_transactions is repeated (on a new producer) on the errors a broker restart causes, and only on those."""

import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

from kadence.topics.transactions import start_transactional


class FakeProducers:
    """A factory of producers whose init_transactions raise ``errors`` in turn, then succeed."""

    def __init__(self, errors):
        self.errors = list(errors)
        self.calls = 0
        self.made = []

    def __call__(self):
        self.made.append(self)
        return self

    def init_transactions(self, timeout):
        self.calls += 1
        if self.errors:
            raise KafkaException(self.errors.pop(0))


def test_concurrent_transactions_and_coordinator_load_are_retried_until_it_succeeds():
    producer = FakeProducers(
        [
            KafkaError(KafkaError.CONCURRENT_TRANSACTIONS),
            KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS),
            KafkaError(KafkaError._TIMED_OUT),
        ]
    )
    assert start_transactional(producer, what="test", max_delay=0.01) is producer
    assert producer.calls == 4 and len(producer.made) == 4  # a new producer for each attempt


def test_a_fatal_error_is_raised_at_once():
    producer = FakeProducers([KafkaError(KafkaError.CONCURRENT_TRANSACTIONS, fatal=True)])
    with pytest.raises(KafkaException):
        start_transactional(producer, what="test", max_delay=0.01)
    assert producer.calls == 1


def test_an_error_that_is_not_transient_is_raised_at_once():
    producer = FakeProducers([KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)])
    with pytest.raises(KafkaException) as info:
        start_transactional(producer, what="test", max_delay=0.01)
    assert info.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert producer.calls == 1


def test_stopping_ends_the_retries_with_the_last_error():
    stop = threading.Event()
    stop.set()
    producer = FakeProducers([KafkaError(KafkaError.CONCURRENT_TRANSACTIONS)] * 100)
    with pytest.raises(KafkaException):
        start_transactional(producer, what="test", stop=stop, max_delay=0.01)
    assert producer.calls == 1
