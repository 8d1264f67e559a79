"""``VisibilityFilter``: what it refuses when made, which records it selects, and when the
counters can answer a count (the Redis walks are tested against a real Redis in
tests/integration/test_projections.py)."""

from __future__ import annotations

import pytest

from kadence.readmodels import VisibilityFilter
from kadence.topics.errors import InvalidQueryError


def _rec(**over):
    rec = {
        "workflow_type": "Order",
        "status": "completed",
        "paused": False,
        "search_attributes": {"tier": "gold"},
        "close_time_ms": 2_000,
    }
    return {**rec, **over}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"status": "done"}, "status must be one of"),
        ({"start_from_ms": -1}, "epoch milliseconds"),
        ({"close_to_ms": True}, "epoch milliseconds"),
        ({"start_to_ms": 1.5}, "epoch milliseconds"),
        ({"search": {"tier": {1}}}, "search attribute 'tier' has a set value"),
        ({"search": {"due": {"datetime": "tomorrow"}}}, "search attribute 'due' has a datetime that is not ISO"),
        ({"search": ["tier"]}, "dict of attribute names to values"),
        ({"paused": "yes"}, "paused is true, false or None"),
    ],
)
def test_a_condition_that_cannot_hold_is_refused_when_the_filter_is_made(kwargs, message):
    with pytest.raises(InvalidQueryError, match=message):
        VisibilityFilter(**kwargs)


def test_every_condition_must_hold():
    assert VisibilityFilter().matches(_rec())
    assert VisibilityFilter(workflow_type="Order", status="completed", search={"tier": "gold"}).matches(_rec())
    assert not VisibilityFilter(workflow_type="Payment").matches(_rec())
    assert not VisibilityFilter(status="failed").matches(_rec())
    assert not VisibilityFilter(search={"tier": "silver"}).matches(_rec())
    assert not VisibilityFilter(search={"tier": "gold", "region": "eu"}).matches(_rec())
    assert not VisibilityFilter(paused=True).matches(_rec())
    assert VisibilityFilter(paused=False).matches(_rec())


def test_close_bounds_are_inclusive_and_exclude_running_runs():
    assert VisibilityFilter(close_from_ms=2_000, close_to_ms=2_000).matches(_rec())
    assert not VisibilityFilter(close_from_ms=2_001).matches(_rec())
    assert not VisibilityFilter(close_to_ms=1_999).matches(_rec())
    assert not VisibilityFilter(close_from_ms=0).matches(_rec(close_time_ms=None, status="running"))


def test_the_filter_keeps_its_own_copy_of_search_and_an_empty_one_is_none():
    search = {"tier": "gold"}
    where = VisibilityFilter(search=search)
    search["tier"] = "silver"
    assert where.matches(_rec())
    assert VisibilityFilter(search={}).search is None


def test_only_type_and_status_conditions_are_answered_by_the_counters():
    assert VisibilityFilter().counted
    assert VisibilityFilter(workflow_type="Order", status="failed").counted
    assert not VisibilityFilter(start_from_ms=0).counted
    assert not VisibilityFilter(close_to_ms=5).counted
    assert not VisibilityFilter(paused=False).counted
    assert not VisibilityFilter(search={"tier": "gold"}).counted
