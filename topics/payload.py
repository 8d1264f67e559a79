"""Payloads and failures as they travel in records.

Payloads are JSON (UTF-8 bytes). A codec hook (``PayloadCodec``) may transform the bytes on the
way out and back (encryption, compression); the engine never needs to read them.
Failures are dicts of the ``Failure`` schema, rebuilt into exceptions with their cause chain.
"""

from __future__ import annotations

import json
import traceback
from typing import Any, Protocol

from .errors import ActivityError, ApplicationError, ChildWorkflowError, SchemaError

__all__ = ["PayloadCodec", "JsonConverter", "failure_from_exception", "exception_from_failure"]


class PayloadCodec(Protocol):
    def encode(self, data: bytes) -> bytes: ...
    def decode(self, data: bytes) -> bytes: ...


class JsonConverter:
    """Values <-> bytes. Arguments travel as a JSON array, results as one JSON value."""

    def __init__(self, codec: PayloadCodec | None = None):
        self.codec = codec

    def to_bytes(self, value: Any) -> bytes:
        try:
            data = json.dumps(value, separators=(",", ":"), default=_default).encode()
        except (TypeError, ValueError) as exc:
            raise SchemaError(f"value is not JSON-serializable: {exc}") from exc
        return self.codec.encode(data) if self.codec else data

    def from_bytes(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if self.codec:
            data = self.codec.decode(data)
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError as exc:
            raise SchemaError(f"payload is not valid JSON: {exc}") from exc


def _default(value):
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses
        return dataclasses.asdict(value)
    raise TypeError(f"{type(value).__name__} is not JSON-serializable")


def failure_from_exception(exc: BaseException, *, depth: int = 0) -> dict:
    """The ``Failure`` record of an exception and its cause chain (at most 8 deep)."""
    if isinstance(exc, ApplicationError):
        etype, non_retryable = exc.type, exc.non_retryable
        message = exc.message
    else:
        etype, non_retryable, message = type(exc).__name__, False, str(exc)
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, chain=False))
    return {
        "type": etype,
        "message": message,
        "stack_trace": stack[-8000:],
        "non_retryable": non_retryable,
        "details": None,
        "cause": failure_from_exception(cause, depth=depth + 1) if cause is not None and depth < 8 else None,
    }


def exception_from_failure(failure: dict | None) -> ApplicationError | None:
    """An ``ApplicationError`` (``ActivityError`` when the type says so) with the chain rebuilt."""
    if failure is None:
        return None
    if failure["type"] == "ActivityError":
        err: ApplicationError = ActivityError(failure["message"], failure=failure)
    elif failure["type"] == "ChildWorkflowError":
        err = ChildWorkflowError(failure["message"], failure=failure)
    else:
        err = ApplicationError(failure["message"], type=failure["type"], non_retryable=failure.get("non_retryable", False))
    cause = exception_from_failure(failure.get("cause"))
    if cause is not None:
        err.__cause__ = cause
    return err
