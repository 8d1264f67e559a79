"""The JSON log format: one object per line, the workflow's fields where they are set, nothing
that could end a line early."""

from __future__ import annotations

import asyncio
import json
import logging

from kadence.topics.log_context import JsonFormatter, reset_log_fields, set_log_fields


def _line(handler: _ListHandler) -> dict:
    """The one line logged since the last call, parsed."""
    [text] = handler.lines
    handler.lines.clear()
    assert "\n" not in text
    return json.loads(text)


class _ListHandler(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[str] = []
        self.setFormatter(JsonFormatter())

    def emit(self, record):
        self.lines.append(self.format(record))


def _logger() -> tuple[logging.Logger, _ListHandler]:
    logger = logging.getLogger("kadence.test_log_context")
    logger.handlers[:] = [handler := _ListHandler()]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger, handler


def test_fields_are_on_the_lines_logged_while_they_are_set_and_only_then():
    logger, handler = _logger()
    logger.info("before")
    before = _line(handler)
    assert set(before) == {"ts", "level", "logger", "message"} and before["message"] == "before"
    token = set_log_fields("order-1", "run-9", 3)
    try:
        logger.warning("workflow %s: something", "order-1")
        during = _line(handler)
    finally:
        reset_log_fields(token)
    assert during["workflow_id"] == "order-1" and during["run_id"] == "run-9" and during["partition"] == 3
    assert "trace_id" not in during and during["level"] == "warning" and during["logger"] == "kadence.test_log_context"
    assert during["ts"].endswith("Z") and len(during["ts"]) == len("2026-12-02T01:02:03.456Z")
    logger.info("after")
    assert "workflow_id" not in _line(handler)


def test_a_forged_line_stays_one_line_and_a_traceback_is_a_field():
    logger, handler = _logger()
    token = set_log_fields("evil\n2026-12-02 INFO forged", None, 0, "t-1")
    try:
        try:
            raise ValueError("boom\nsecond line")
        except ValueError:
            logger.exception("failed on %s", "evil\nid")
    finally:
        reset_log_fields(token)
    line = _line(handler)
    assert line["workflow_id"] == "evil\n2026-12-02 INFO forged" and line["trace_id"] == "t-1"
    assert "ValueError: boom" in line["exc"] and line["message"].startswith("failed on evil")


def test_an_asyncio_task_keeps_the_fields_it_was_created_with():
    logger, handler = _logger()

    async def activity():
        await asyncio.sleep(0)
        logger.info("in the activity")

    async def main():
        token = set_log_fields("order-2", "run-2", 1)
        try:
            task = asyncio.get_running_loop().create_task(activity())
        finally:
            reset_log_fields(token)
        logger.info("outside")
        await task

    asyncio.run(main())
    outside, inside = (json.loads(text) for text in handler.lines)
    assert "workflow_id" not in outside and inside["workflow_id"] == "order-2" and inside["partition"] == 1
