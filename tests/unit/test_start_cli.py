"""``kadence start --search-attributes/--cron-schedule``: bad input is refused before anything
connects or is sent (exit 2, the option named). The broker runs of starts are the integration
tests'."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kadence.cli.main import main

BASE = ["--bootstrap", "127.0.0.1:1", "start", "Report", "--id", "r-1", "--task-queue", "q"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--search-attributes", "{not json"], "not JSON"),
        (
            ["--search-attributes", '{"Due": {"datetime": "soon"}}'],
            "search attribute 'Due' has a datetime that is not ISO",
        ),
        (["--search-attributes", '{"Tags": ["eu", 1]}'], "search attribute 'Tags' is a list whose item 1 is a int"),
    ],
)
def test_bad_search_attributes_are_refused_naming_the_option(args, message):
    result = CliRunner().invoke(main, [*BASE, *args])
    assert result.exit_code == 2, result.output
    assert "--search-attributes" in result.output and message in result.output


def test_the_options_are_documented_in_help():
    result = CliRunner().invoke(main, ["start", "--help"])
    assert result.exit_code == 0 and "--cron-schedule" in result.output and "--search-attributes" in result.output
