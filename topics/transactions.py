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
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer

__all__ = ["GuardedCall", "TxnCallHung", "TxnWatchdog", "start_transactional"]

T = TypeVar("T")

log = logging.getLogger(__name__)

#: errors that mean "the broker is busy or did not answer in time", not "this producer is
#: broken", whether or not librdkafka flags them retriable (the chaos seed's was raised as is)
_RETRY_CODES = {
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError.CONCURRENT_TRANSACTIONS,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
}


def _retriable(exc: KafkaException) -> bool:
    err = exc.args[0] if exc.args else None
    if not isinstance(err, KafkaError) or err.fatal():
        return False
    return err.retriable() or err.code() in _RETRY_CODES


def start_transactional(
    factory: Callable[[], Producer],
    *,
    what: str,
    attempt_timeout: float = 60.0,
    stop: threading.Event | None = None,
    max_delay: float = 5.0,
) -> Producer:
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
            log.warning(
                "%s: starting transactions failed (%s); retrying in %.1f s with a new producer",
                what,
                exc.args[0].str(),
                delay,
            )
            stop.wait(delay)
            delay = min(max_delay, delay * 2)


class TxnWatchdog:
    """Calls ``on_stall(seconds)`` once when a transaction call blocks for more than ``limit_s``.

    librdkafka can block in ``send_offsets_to_transaction`` for ever, whatever its timeout
    (confluentinc/librdkafka#5511; seen by the chaos suite after a broker restart, following an
    OUT_OF_ORDER_SEQUENCE_NUMBER abort). The consumer's heartbeat thread keeps the shards
    assigned to the blocked instance meanwhile, so they would stall for good. The processor exits
    (a restart with the same instance ID takes them back at once); a worker's activity reporter
    replaces its producer and thread (``kadence._reporter``).
    """

    def __init__(self, limit_s: float, on_stall: Callable[[float], object]) -> None:
        self.limit_s = limit_s
        self._on_stall = on_stall
        self._since: float | None = None
        self._stop = threading.Event()

    def begin(self) -> None:
        self._since = time.monotonic()

    def end(self) -> None:
        self._since = None

    def stalled_for(self, now: float | None = None) -> float:
        since = self._since
        return 0.0 if since is None else (time.monotonic() if now is None else now) - since

    def start(self) -> None:
        threading.Thread(target=self._watch, name="kadence-txn-watchdog", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(1.0):
            blocked = self.stalled_for()
            if blocked > self.limit_s:
                self._on_stall(blocked)
                return


class TxnCallHung(Exception):
    """A transaction call did not return within its allowance (``GuardedCall``). The producer
    it was made on is still inside it and must not be used again: a new producer with the same
    ``transactional.id`` fences it, and the batch is read again."""


class _Call(Future[Any]):
    """A call handed to the helper; ``given_up``: its caller stopped waiting while it ran."""

    given_up = False


class GuardedCall:
    """Runs a producer call on a helper thread, so that its caller gets control back when
    librdkafka does not return from it.

    After a broker restart, ``send_offsets_to_transaction`` can wait for ever on a group
    coordinator that librdkafka dropped, whatever its timeout (librdkafka #5456, #5511; decision
    0035). Waiting inside the call, the processor held its shards and did nothing for minutes
    (its watchdog exited it after 180 s). With the call on a helper thread the processor waits
    at most ``allowance`` and then replaces the producer; the stuck helper is left to its call
    and a new one serves the next.

    The allowance starts at ``base_s``, doubles after each hang up to ``max_s`` (a machine slow
    enough to need longer does not churn producers for ever), and is back at ``base_s`` after a
    call returns in time. A call given up on before its helper started it (the process was
    stopped or starved past the allowance) is cancelled: it never runs after its caller moved on
    to another producer. A hand-off to the helper costs two thread switches per call;
    decision 0035 has the measurement.
    """

    def __init__(self, name: str, *, base_s: float, max_s: float = 60.0) -> None:
        if base_s <= 0 or max_s < base_s:
            raise ValueError("GuardedCall needs 0 < base_s <= max_s")
        self.name = name
        self.base_s = base_s
        self.max_s = max_s
        self.allowance = base_s
        #: calls given up on, in all
        self.abandoned = 0
        #: helpers still inside a call that was given up on (each holds a librdkafka client)
        self.stuck = 0
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Any] | None = None

    def _helper(self) -> queue.SimpleQueue[Any]:
        if self._jobs is None:
            jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
            threading.Thread(
                target=self._serve, args=(jobs,), name=f"{self.name}-{self.abandoned}", daemon=True
            ).start()
            self._jobs = jobs
        return self._jobs

    def _serve(self, jobs: queue.SimpleQueue[Any]) -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            fn, fut = job
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                result, error = fn(), None
            except BaseException as exc:  # noqa: BLE001 - handed to the caller as is
                result, error = None, exc
            with self._lock:  # the caller decides under the lock whether it still waits for it
                if error is None:
                    fut.set_result(result)
                else:
                    fut.set_exception(error)
                if fut.given_up:
                    self.stuck -= 1

    def __call__(self, fn: Callable[[], T]) -> T:
        """``fn()``'s result or exception, or ``TxnCallHung`` after the allowance."""
        fut = _Call()
        jobs = self._helper()
        jobs.put((fn, fut))
        result: T
        try:
            result = fut.result(timeout=self.allowance)
        except TimeoutError:
            with self._lock:
                # not started yet (this process was stopped or starved past the allowance): it
                # never will be; the caller goes on with another producer and must not meet it
                cancelled = fut.cancel()
                if not cancelled and not fut.done():
                    fut.given_up = True
                    self.stuck += 1
            if not cancelled and fut.done():  # it returned just now, or fn itself raised TimeoutError
                result = fut.result()
            else:
                allowed = self.allowance
                # that helper is stuck in fn: it ends if its call ever returns; the next call gets a new one
                jobs.put(None)
                self._jobs = None
                self.abandoned += 1
                self.allowance = min(self.max_s, self.allowance * 2)
                raise TxnCallHung(f"{self.name}: the call has not returned after {allowed:.1f} s") from None
        self.allowance = self.base_s
        return result

    def close(self) -> None:
        if self._jobs is not None:
            self._jobs.put(None)
            self._jobs = None
