"""The assignment watch ends a processor only when the coordinator's shards for it stay unserved
for its limit while no assignment is in progress."""

from kadence.processors.assignment_watch import AssignmentWatch


def _watch(assigned, served, assigning=lambda: False):
    stalls = []
    watch = AssignmentWatch(assigned=assigned, served=served, assigning=assigning, limit_s=60,
                            on_stall=lambda missing, s: stalls.append((sorted(missing), s)))
    return watch, stalls


def test_shards_assigned_but_never_served_end_the_processor_after_the_limit():
    watch, stalls = _watch(lambda: {0, 1, 2}, lambda: {2})
    assert watch.check(100.0) is False  # first seen
    assert watch.check(150.0) is False
    assert watch.check(161.0) is True and stalls == [([0, 1], 61.0)]


def test_an_assignment_in_progress_or_a_served_shard_resets_the_clock():
    assigning = [False]
    served = [set()]
    watch, stalls = _watch(lambda: {0}, lambda: served[0], lambda: assigning[0])
    watch.check(0.0)
    assigning[0] = True  # restoring: not stalled, however long
    assert watch.check(100.0) is False
    assigning[0] = False
    assert watch.check(101.0) is False  # the clock starts again
    served[0] = {0}
    assert watch.check(500.0) is False and stalls == []


def test_a_broker_that_does_not_answer_or_a_standby_is_no_evidence():
    watch, stalls = _watch(lambda: None, lambda: set())
    assert not any(watch.check(t) for t in (0.0, 100.0, 1000.0))
    watch, stalls = _watch(lambda: set(), lambda: set())
    assert not any(watch.check(t) for t in (0.0, 100.0, 1000.0)) and stalls == []
