"""``GuardedCall``: a producer call that never returns gives control back to its caller after the
allowance (librdkafka #5511, decision 0035), and the next call is served by a new helper."""

from __future__ import annotations

import queue
import threading

import pytest

from kadence.topics.transactions import GuardedCall, TxnCallHung


def test_a_call_that_returns_gives_its_result_and_its_exception():
    guard = GuardedCall("t", base_s=5)
    assert guard(lambda: 41 + 1) == 42
    with pytest.raises(KeyError):
        guard(lambda: {}["missing"])
    with pytest.raises(TimeoutError, match="its own"):  # the call's own TimeoutError is not a hang
        guard(lambda: (_ for _ in ()).throw(TimeoutError("its own")))
    assert guard.abandoned == 0
    guard.close()


def test_a_call_that_never_returns_is_given_up_and_the_next_call_gets_a_new_helper():
    guard = GuardedCall("t", base_s=0.2, max_s=0.5)
    release = threading.Event()
    stuck_in = []

    def hang():
        stuck_in.append(threading.current_thread().name)
        release.wait(30)
        return "too late"

    try:
        with pytest.raises(TxnCallHung, match="0.2 s"):
            guard(hang)
        assert guard.abandoned == 1 and guard.allowance == 0.4  # doubled
        with pytest.raises(TxnCallHung, match="0.4 s"):
            guard(hang)
        assert guard.allowance == 0.5  # capped at max_s
        served_by = []
        assert guard(lambda: served_by.append(threading.current_thread().name) or "ok") == "ok"
        assert served_by[0] not in stuck_in  # not queued behind a stuck call
        assert guard.allowance == 0.2  # back to the base after a call returned in time
        assert guard.abandoned == 2
    finally:
        release.set()
        guard.close()


@pytest.mark.parametrize("base, top", [(0, 1), (-1, 1), (2, 1)])
def test_a_bad_allowance_is_refused(base, top):
    with pytest.raises(ValueError):
        GuardedCall("t", base_s=base, max_s=top)


def test_a_helper_whose_call_returns_late_is_no_longer_counted_stuck_and_ends():
    guard = GuardedCall("late", base_s=0.2)
    release = threading.Event()
    try:
        with pytest.raises(TxnCallHung):
            guard(lambda: release.wait(30))
        assert guard.abandoned == 1 and guard.stuck == 1
        (helper,) = [t for t in threading.enumerate() if t.name == "late-0"]
        release.set()
        helper.join(5)
        assert not helper.is_alive(), "the abandoned helper went on waiting for jobs nobody sends"
        assert guard.stuck == 0 and guard.abandoned == 1
    finally:
        release.set()
        guard.close()


def test_a_call_given_up_on_before_its_helper_took_it_never_runs():
    """A process stopped (SIGSTOP, a starved machine) past the allowance wakes with the caller's
    wait already expired and the helper not yet inside the call. The caller raises TxnCallHung and
    goes on with a new producer; the call it gave up on must not start afterwards (in the
    activity reporter it would have run on the producer of the next try)."""
    guard = GuardedCall("t", base_s=0.1, max_s=0.1)
    unserved: queue.SimpleQueue = queue.SimpleQueue()
    guard._jobs = unserved  # a helper that has not been scheduled yet
    ran = []
    with pytest.raises(TxnCallHung):
        guard(lambda: ran.append("late"))
    helper = threading.Thread(target=guard._serve, args=(unserved,))
    helper.start()  # the helper gets the CPU at last: the job, then the stop the caller queued
    helper.join(5)
    assert not helper.is_alive() and ran == []
    assert guard.stuck == 0  # nothing is inside a call
    assert guard(lambda: 7) == 7  # a new helper serves the next call
    guard.close()
