"""What a workflow ID, a task queue and a workflow, signal, query or activity name may be: one
definition, used by the SDK, the gateway, the bridges and the history processor.

A workflow ID is at most 1,000 characters (as in Temporal) with no control characters (C0/C1, line and paragraph
separators, bidirectional overrides: they forge log lines and hide text in consoles). It may hold
``/``: child workflows are named ``parent/child-N``, and every gateway route takes it encoded
(``a%2Fb``). A name (workflow type, signal, query, activity type) is at most 255 characters of
the same kind and holds no ``/``: names appear as single path segments. A task queue names Kafka
topics (``{ns}.tasks.activity.{queue}``), so it is what a topic name may hold: at most 100 of
``A-Z a-z 0-9 . _ -``, not starting with a dot.

``escape`` is for the other direction: any identifier printed to a log or a terminal is escaped,
so that one recorded before these rules (or read from a raw record) cannot forge a line.
"""

from __future__ import annotations

import logging
import re

from .errors import InvalidIdentifierError

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_NAME_LENGTH",
    "TASK_QUEUE_PATTERN",
    "EscapingFormatter",
    "check_name",
    "check_task_queue",
    "check_workflow_id",
    "escape",
    "problem",
    "task_queue_problem",
]

MAX_ID_LENGTH = 1000
MAX_NAME_LENGTH = 255

#: C0 and C1 controls, DEL, line/paragraph separators, bidirectional embedding/override/isolate controls
#: what a task queue may be (part of Kafka topic names, whose legal characters are these)
TASK_QUEUE_PATTERN = r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}$"
_TASK_QUEUE = re.compile(TASK_QUEUE_PATTERN)
_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def problem(value: object, *, max_length: int, slash: bool) -> str | None:
    """Why ``value`` is not a valid identifier, or None if it is."""
    if not isinstance(value, str):
        return f"must be a string, not {type(value).__name__}"
    if not value:
        return "must not be empty"
    if len(value) > max_length:
        return f"is {len(value)} characters long, over the limit of {max_length}"
    bad = _FORBIDDEN.search(value)
    if bad:
        return f"contains the control character U+{ord(bad.group()):04X} at position {bad.start()}"
    if not slash and "/" in value:
        return "must not contain '/'"
    return None


def task_queue_problem(value: object) -> str | None:
    """Why ``value`` is not a valid task queue, or None if it is."""
    if not isinstance(value, str):
        return f"must be a string, not {type(value).__name__}"
    if not _TASK_QUEUE.match(value):
        return (
            "must be 1 to 100 of the characters A-Z a-z 0-9 . _ - (not starting with '.'): it names "
            f"Kafka topics; got {escape(value)[:120]!r}"
        )
    return None


def check_task_queue(value: object, *, field: str = "task_queue") -> str:
    """``value`` if it is a valid task queue; ``InvalidIdentifierError`` naming ``field`` if not."""
    why = task_queue_problem(value)
    if why:
        raise InvalidIdentifierError(f"{field} {why}", field=field)
    return value  # type: ignore[return-value]


def check_workflow_id(value: object, *, field: str = "workflow_id") -> str:
    """``value`` if it is a valid workflow ID; ``InvalidIdentifierError`` naming ``field`` if not."""
    why = problem(value, max_length=MAX_ID_LENGTH, slash=True)
    if why:
        raise InvalidIdentifierError(f"{field} {why}", field=field)
    return value  # type: ignore[return-value]


def check_name(value: object, *, field: str) -> str:
    """``value`` if it is a valid workflow type, signal, query or activity name; ``InvalidIdentifierError``
    naming ``field`` if not."""
    why = problem(value, max_length=MAX_NAME_LENGTH, slash=False)
    if why:
        raise InvalidIdentifierError(f"{field} {why}", field=field)
    return value  # type: ignore[return-value]


def escape(value: object) -> str:
    """``value`` as text safe for one log line: control characters (and backslashes) escaped."""
    text = str(value)
    if not _FORBIDDEN.search(text) and "\\" not in text:
        return text
    return _FORBIDDEN.sub(lambda m: f"\\u{ord(m.group()):04x}", text.replace("\\", "\\\\"))


class EscapingFormatter(logging.Formatter):
    """A log formatter whose messages are one line each: control characters in the message (an
    identifier, a reason, an error text from a record) are escaped; a traceback stays as it is.
    Every ``kadence`` command logs through it; an application embedding the SDK can too."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = escape(record.message)
        return super().formatMessage(record)
