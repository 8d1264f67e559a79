"""The list commands' ``-o tsv|json|table``: one helper, so every list reads the same."""

import json

from kadence.cli.output import emit_rows

ROWS = [
    {"workflow_id": "order-1", "status": "completed", "search_attributes": {"b": 2, "a": "x"}, "extra": 7},
    {"workflow_id": "has\ttab\nand newline", "status": None, "search_attributes": {}, "extra": 8},
]
COLUMNS = ("workflow_id", "status", "search_attributes")


def _lines(fmt, **kw):
    out = []
    emit_rows(ROWS, COLUMNS, fmt, echo=out.append, **kw)
    return out


def test_tsv_is_a_line_per_row_in_column_order_with_tabs_and_newlines_escaped():
    assert _lines("tsv") == ["order-1\tcompleted\ta=x,b=2", "has\\ttab\\nand newline\t\t"]


def test_json_is_one_document_with_every_field_and_the_extras():
    (doc,) = _lines("json", extra={"next_cursor": "c1"})
    parsed = json.loads(doc)
    assert parsed == {"items": ROWS, "next_cursor": "c1"}


def test_table_has_a_header_and_aligned_columns():
    (text,) = _lines("table")
    header, first, second = text.splitlines()
    assert header.split() == list(COLUMNS)
    assert first.split() == ["order-1", "completed", "a=x,b=2"]
    assert header.index("status") == first.index("completed")  # aligned
    assert second.startswith("has\\ttab\\nand newline")


def test_the_cli_offers_the_log_formats_the_config_knows():
    """``kadence --log-format`` lists its choices without importing the kernel (a fast CLI)."""
    from kadence.cli.main import LOG_FORMATS
    from kadence.topics.config import LOG_FORMATS as KNOWN

    assert tuple(LOG_FORMATS) == tuple(KNOWN)


def test_the_cli_group_imports_nothing_heavy():
    """A command over the gateway pays only for itself: the group and the client commands'
    module load neither the kernel nor the SDK (measured: ``make bench``, scenario ``cli``)."""
    import subprocess
    import sys

    code = (
        "import sys, kadence.cli.main, kadence.cli.workflows, kadence.cli.listing; "
        "heavy = [m for m in ('kadence.topics', 'kadence._client', 'confluent_kafka', 'httpx') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def test_the_cli_lists_the_run_statuses_the_read_models_know():
    from kadence.cli.listing import RUN_STATUSES
    from kadence.readmodels.keys import RUN_STATUSES as KNOWN

    assert tuple(RUN_STATUSES) == tuple(KNOWN)
