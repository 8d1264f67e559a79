"""The bookkeeping behind transactional activity results (sdk/_reporter.py), without a broker."""

from kadence._reporter import decode_reported, encode_reported, offsets_for
from kadence._task_consumer import OffsetTracker as _OffsetTracker


def test_commit_point_is_the_lowest_task_in_flight_and_names_the_reported_ones_above_it():
    t = _OffsetTracker()
    for o in range(5):
        t.started(0, o)
    t.finished(0, 2)
    t.finished(0, 4)
    assert t.commit_points(set()) == {0: (0, [2, 4])}
    # as if 3 were finishing in the transaction being built
    assert t.commit_points({(0, 3)}) == {0: (0, [2, 3, 4])}
    t.finished(0, 0)
    assert t.commit_points(set()) == {0: (1, [2, 4])}
    t.finished(0, 1)
    t.finished(0, 3)
    assert t.commit_points(set()) == {0: (5, [])}


def test_a_revoked_partition_is_left_out_of_every_commit():
    t = _OffsetTracker()
    t.started(1, 7)
    t.finished(1, 7)
    t.started(2, 3)
    t.revoke([1])
    assert t.commit_points(set()) == {2: (3, [])}


def test_reported_offsets_round_trip_through_the_commit_metadata():
    meta = encode_reported(100, [101, 105, 230])
    assert decode_reported(100, meta) == {101, 105, 230}
    assert encode_reported(100, []) == "" and decode_reported(100, "") == set()
    assert decode_reported(100, "someone else's metadata") == set()
    assert decode_reported(-1001, meta) == set()  # no committed offset: nothing to skip


def test_metadata_that_would_not_fit_leaves_the_rest_to_run_again():
    many = list(range(1, 5000))
    meta = encode_reported(0, many)
    assert len(meta) <= 3500
    named = decode_reported(0, meta)
    assert named and named == set(many[: len(named)])


def test_offsets_carry_their_metadata():
    (tp,) = offsets_for({("t", 3): (10, [12])})
    assert (tp.topic, tp.partition, tp.offset, tp.metadata) == ("t", 3, 10, encode_reported(10, [12]))
