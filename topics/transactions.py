"""Starting a transactional producer so that a broker restart does not end the process.

``init_transactions`` fails with a retriable error while the broker is still finishing the
previous incarnation's transaction (``CONCURRENT_TRANSACTIONS``: a processor restarted right
after it was killed mid-transaction), while its transaction coordinator loads after a restart
(``COORDINATOR_LOAD_IN_PROGRESS``, ``NOT_COORDINATOR``), or when the call times out during an
outage. A processor that exited instead left its shards to a supervisor's restart (seen in a ``make chaos`` seed:
``Failed to initialize Producer ID: ... CONCURRENT_TRANSACTIONS``).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from confluent_kafka import KafkaError, KafkaException, Producer

__all__ = ["start_transactional"]

log = logging.getLogger(__name__)

#: errors that mean "the broker is busy or did not answer in time", not "this producer is
#: broken", whether or not librdkafka flags them retriable (the chaos seed's was raised as is)
_RETRY_CODES = {KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN,
                KafkaError.CONCURRENT_TRANSACTIONS, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR}


def _retriable(exc: KafkaException) -> bool:
    err = exc.args[0] if exc.args else None
    if not isinstance(err, KafkaError) or err.fatal():
        return False
    return err.retriable() or err.code() in _RETRY_CODES


def start_transactional(factory: Callable[[], Producer], *, what: str, attempt_timeout: float = 20.0,
                        stop: threading.Event | None = None, max_delay: float = 5.0) -> Producer:
    """A producer from ``factory()`` whose ``init_transactions`` succeeded.

    A failed attempt is repeated with backoff while its error is transient; each repeat uses a
    new producer from ``factory`` (same ``transactional.id``), since a producer whose init timed
    out may never finish it: a test's processor once sat in its first ``init_transactions`` for
    the whole minute on a fresh broker while a new process started at once. A fatal or lasting
    error, or ``stop`` being set, raises the last error."""
    stop = stop or threading.Event()
    delay = 0.2
    while True:
        producer = factory()
        try:
            producer.init_transactions(attempt_timeout)
            return producer
        except KafkaException as exc:
            if not _retriable(exc) or stop.is_set():
                raise
            log.warning("%s: starting transactions failed (%s); retrying in %.1f s with a new producer", what,
                        exc.args[0].str(), delay)
            stop.wait(delay)
            delay = min(max_delay, delay * 2)
