"""Which workflow a log line is about, for the structured (JSON) log format (issue 21, item 4).

The history processor, the worker and the archiver set the fields while they handle one workflow's
command, task or run: ``workflow_id``, ``run_id``, ``partition`` and ``trace_id`` (when the record
carries one). Every line logged meanwhile, in that thread or asyncio task, carries them in
``--log-format json`` (``KADENCE_LOG_FORMAT=json``), whichever module logged it; the text format's
messages name them already. No payload, input, result or secret is ever a field: the fields are
identifiers only, and the message is the same escaped text the text format prints.

A context variable, not ``extra=`` on each call: one assignment per command covers every line the
state machine, the effects and the codecs log for it.
"""

from __future__ import annotations

import json
import logging
import time
from contextvars import ContextVar, Token
from typing import Any

from .identifiers import escape

__all__ = ["FIELDS", "LOG_FIELDS", "JsonFormatter", "reset_log_fields", "set_log_fields"]

#: the fields a JSON line may carry about a workflow, in this order
FIELDS = ("workflow_id", "run_id", "partition", "trace_id")

LOG_FIELDS: ContextVar[dict[str, Any] | None] = ContextVar("kadence_log_fields", default=None)


def set_log_fields(
    workflow_id: str | None = None, run_id: str | None = None, partition: int | None = None, trace_id: str | None = None
) -> Token[dict[str, Any] | None]:
    """Set the fields for what follows in this context; pass the token to ``reset_log_fields``."""
    return LOG_FIELDS.set({"workflow_id": workflow_id, "run_id": run_id, "partition": partition, "trace_id": trace_id})


def reset_log_fields(token: Token[dict[str, Any] | None]) -> None:
    LOG_FIELDS.reset(token)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger``,
    ``message``, the workflow fields that are set, ``exc`` (the traceback) when there is one.
    ``json.dumps`` escapes every control character, so no value can end the line early."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": escape(record.getMessage()),
        }
        fields = LOG_FIELDS.get()
        if fields:
            out.update((k, fields[k]) for k in FIELDS if fields.get(k) is not None)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc"] = record.exc_text
        return json.dumps(out, ensure_ascii=True, default=str)
