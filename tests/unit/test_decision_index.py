"""docs/decisions/README.md indexes every decision record, each with a status."""

import re
from pathlib import Path

DECISIONS = Path(__file__).resolve().parents[2] / "docs" / "decisions"


def test_every_decision_record_has_one_row_with_a_status():
    records = sorted(p.name for p in DECISIONS.glob("[0-9][0-9][0-9][0-9]-*.md"))
    rows = re.findall(
        r"^\| \[(\d{4})\]\(([^)]+)\) \| (.+?) \| (.+?) \|$", (DECISIONS / "README.md").read_text(), re.MULTILINE
    )
    assert sorted(target for _n, target, _t, _s in rows) == records
    for number, target, _title, status in rows:
        assert target.startswith(number + "-")
        assert re.match(r"(accepted|superseded)", status), (number, status)
