"""Pure logic of the projections: time arguments of `kadence list`, index members, cursors."""

import pytest

from kadence.cli.projections import parse_time_ms
from kadence.readmodels.keys import ProjectionKeys, index_member
from kadence.readmodels.visibility import _decode_cursor, _encode_cursor
from kadence.topics.errors import InvalidQueryError


def test_time_arguments():
    now = 1_700_000_000.0
    assert parse_time_ms("15m", now=now) == int((now - 900) * 1000)
    assert parse_time_ms("2h", now=now) == int((now - 7200) * 1000)
    assert parse_time_ms("1700000000123") == 1_700_000_000_123
    assert parse_time_ms("2023-11-14T22:13:20") == 1_700_000_000_000  # naive is UTC
    assert parse_time_ms("2023-11-14T23:13:20+01:00") == 1_700_000_000_000
    assert parse_time_ms(None) is None
    with pytest.raises(Exception, match="ISO-8601"):
        parse_time_ms("yesterday")


def test_index_members_sort_newest_first_and_cursors_round_trip():
    members = [index_member(ms, f"w{ms}/r") for ms in (5, 1_700_000_000_000, 42)]
    assert [m.split("|")[1] for m in sorted(members)] == ["w1700000000000/r", "w42/r", "w5/r"]
    assert _decode_cursor(_encode_cursor(members[0])) == members[0]
    with pytest.raises(InvalidQueryError):
        _decode_cursor("not-a-cursor")


def test_projection_keys_are_namespaced_and_generation_prefixed():
    k = ProjectionKeys("prod", "visibility")
    assert k.pointer == "kadence:prod:visibility:gen"
    assert k.prefix(3) == "kadence:prod:visibility:g3:" and k.pattern(3) == "kadence:prod:visibility:g3:*"
    with pytest.raises(ValueError):
        ProjectionKeys("prod", "nope")


def test_the_rebuild_progress_column_renders_before_the_total_is_known():
    """`kadence projections rebuild` without --quiet crashed at once: the bar starts with no total."""
    from rich.progress import Progress

    from kadence.cli.projections import OffsetsColumn

    column = OffsetsColumn()
    with Progress(column, disable=True) as bar:
        task_id = bar.add_task("rebuild", total=None)
        assert column.render(bar.tasks[0]).plain == "0/? offsets"
        bar.update(task_id, total=40000, completed=12000)
        assert column.render(bar.tasks[0]).plain == "12,000/40,000 offsets"
