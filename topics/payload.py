"""Payloads and failures as they travel in records.

Payloads are JSON (UTF-8 bytes). Typed values (dataclasses, pydantic models, enums, datetimes,
UUIDs) are written as JSON and read back into the type their receiver declares
(``kadence.topics.typed``). A codec hook (``PayloadCodec``) may transform the bytes on the way
out and back (encryption, compression); the engine never needs to read them.
Failures are dicts of the ``Failure`` schema, rebuilt into exceptions with their cause chain.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from .errors import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    ConfigError,
    PayloadTooLargeError,
    PayloadTypeError,
    SchemaError,
)
from .large_payloads import LargePayloads, is_reference
from .typed import adapter, convert, signature, to_jsonable

__all__ = [
    "JsonConverter",
    "PayloadCodec",
    "PayloadConverter",
    "exception_from_failure",
    "failure_from_exception",
    "load_codec",
]


class PayloadCodec(Protocol):
    def encode(self, data: bytes) -> bytes: ...
    def decode(self, data: bytes) -> bytes: ...


def _type_name(cls: type) -> str:
    """The failure type name an exception class is recorded under: its class name."""
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        raise TypeError(f"{cls!r} is not an exception class")
    return cls.__name__


class PayloadConverter(Protocol):
    """What the client, the worker and ``kadence.testing`` call to turn values into payload bytes
    and back, and failures into records and back; ``JsonConverter`` is the one Kadence ships.
    Another format implements these."""

    def to_bytes(self, value: Any) -> bytes: ...
    def from_bytes(self, data: bytes | None, hint: Any = None, *, what: str = "payload") -> Any: ...
    def args_from_bytes(
        self, data: bytes | None, fn: Callable[..., Any], *, what: str, method: bool = False
    ) -> list[Any]: ...
    def result_from_bytes(
        self, data: bytes | None, fn: Callable[..., Any] | None, *, what: str, method: bool = False
    ) -> Any: ...
    def failure(self, exc: BaseException) -> dict[str, Any]: ...
    def exception(self, failure: dict[str, Any] | None) -> BaseException | None: ...


class JsonConverter:
    """Values <-> bytes. Arguments travel as a JSON array, results as one JSON value; typed on the
    way in by the receiving function's hints (``kadence.topics.typed``). ``large``: where payloads
    over a size threshold are stored (``kadence.topics.large_payloads``); by default they stay
    inline, up to the 32 MiB payload limit."""

    def __init__(
        self,
        codec: PayloadCodec | None = None,
        *,
        exceptions: Iterable[type[BaseException]] = (),
        large: LargePayloads | None = None,
    ) -> None:
        self.codec = codec
        self.large = large if large is not None else LargePayloads()
        #: failure type name -> the exception class a failure of that type is raised as
        self.exceptions = {_type_name(cls): cls for cls in exceptions}

    def to_bytes(self, value: Any) -> bytes:
        try:
            data = json.dumps(value, separators=(",", ":"), default=to_jsonable).encode()
        except (TypeError, ValueError) as exc:
            raise SchemaError(f"value is not JSON-serializable: {exc}") from exc
        return self.large.offload(self.codec.encode(data) if self.codec else data)

    def _decoded(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if is_reference(data):
            data = self.large.resolve(data)
        if self.codec:
            try:
                data = self.codec.decode(data)
            except Exception as exc:
                raise SchemaError(
                    f"the payload codec {type(self.codec).__name__} could not decode a payload "
                    f"({type(exc).__name__}): was it written with another codec or key?"
                ) from exc
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError as exc:
            hint = (
                ""
                if self.codec
                else "; a payload written through a codec needs the same codec here "
                "(Client.connect(codec=...), kadence --codec or KADENCE_CODEC)"
            )
            raise SchemaError(f"payload is not valid JSON: {exc}{hint}") from exc

    def from_bytes(self, data: bytes | None, hint: Any = None, *, what: str = "payload") -> Any:
        """The value; validated into ``hint`` when one is given (``PayloadTypeError`` if it
        does not match)."""
        value = self._decoded(data)
        ad = adapter(hint) if hint is not None else None
        return value if ad is None else convert(value, ad, what)

    def args_from_bytes(
        self, data: bytes | None, fn: Callable[..., Any], *, what: str, method: bool = False
    ) -> list[Any]:
        """Arguments for ``fn`` (``method``: its first parameter is ``self``), each validated into
        its parameter's type."""
        return signature(fn, method=method).args(self._decoded(data) or [], what)

    def result_from_bytes(
        self, data: bytes | None, fn: Callable[..., Any] | None, *, what: str, method: bool = False
    ) -> Any:
        """A result of ``fn`` (an activity, a workflow's run method), validated into its return
        type; as decoded when ``fn`` is None or returns ``Any``."""
        value = self._decoded(data)
        return value if fn is None else signature(fn, method=method).result(value, what)

    def failure(self, exc: BaseException) -> dict[str, Any]:
        """``failure_from_exception`` with details encoded as payloads (through the codec)."""
        return failure_from_exception(exc, encode=self.to_bytes)

    def exception(self, failure: dict[str, Any] | None) -> BaseException | None:
        """``exception_from_failure`` with this converter's registered classes and codec."""
        return exception_from_failure(failure, classes=self.exceptions, decode=self.from_bytes)


def _plain_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), default=to_jsonable).encode()


def failure_from_exception(
    exc: BaseException, *, depth: int = 0, encode: Callable[[Any], bytes] = _plain_json
) -> dict[str, Any]:
    """The ``Failure`` record of an exception and its cause chain (at most 8 deep). An
    ``ApplicationError``'s ``details`` travel as a payload (``encode``: the converter's, so a
    codec applies to them too)."""
    details = None
    if isinstance(exc, ApplicationError):
        etype, non_retryable = exc.type, exc.non_retryable
        message = exc.message
        if exc.details:
            try:
                details = encode(list(exc.details))
            except SchemaError:  # details that cannot travel are left out, not the failure
                details = None
    elif isinstance(exc, (PayloadTypeError, PayloadTooLargeError)):  # the same input fails the same way: no retry
        etype, non_retryable, message = type(exc).__name__, True, str(exc)
    else:
        etype, non_retryable, message = type(exc).__name__, False, str(exc)
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, chain=False))
    return {
        "type": etype,
        "message": message,
        "stack_trace": stack[-8000:],
        "non_retryable": non_retryable,
        "details": details,
        "cause": failure_from_exception(cause, depth=depth + 1, encode=encode)
        if cause is not None and depth < 8
        else None,
    }


def exception_from_failure(
    failure: dict[str, Any] | None,
    *,
    classes: dict[str, type] | None = None,
    decode: Callable[[bytes | None], Any] | None = None,
) -> BaseException | None:
    """The exception a ``Failure`` stands for, with its cause chain: an instance of the class
    registered under its type name (``classes``, e.g. ``JsonConverter(exceptions=[...])``),
    built as ``cls(message, *details)``; otherwise an ``ApplicationError`` (``ActivityError``,
    ``ChildWorkflowError`` when the type says so) carrying the type name and the details."""
    if failure is None:
        return None
    details = ()
    if failure.get("details") is not None:
        try:
            decoded = (decode or _decode_plain)(failure["details"])
            details = tuple(decoded) if isinstance(decoded, list) else (decoded,)
        except SchemaError:
            details = ()
    err: BaseException | None = None
    if failure["type"] == "ActivityError":
        err = ActivityError(failure["message"], failure=failure)
    elif failure["type"] == "ChildWorkflowError":
        err = ChildWorkflowError(failure["message"], failure=failure)
    elif classes and failure["type"] in classes:
        try:
            err = classes[failure["type"]](failure["message"], *details)
        except Exception:  # noqa: BLE001 - a constructor that does not take (message, *details)
            err = None
    if err is None:
        err = ApplicationError(
            failure["message"], *details, type=failure["type"], non_retryable=failure.get("non_retryable", False)
        )
    cause = exception_from_failure(failure.get("cause"), classes=classes, decode=decode)
    if cause is not None:
        err.__cause__ = cause
    return err


def _decode_plain(data: bytes | None) -> Any:
    try:
        return json.loads(data) if data else None
    except ValueError as exc:
        raise SchemaError(f"failure details are not valid JSON: {exc}") from exc


def load_codec(spec: str) -> PayloadCodec:
    """The codec named by ``spec``, ``module:factory`` (``KADENCE_CODEC``, ``kadence --codec``):
    ``factory`` is called with no arguments (a class or a function) and must give an object with
    ``encode(bytes) -> bytes`` and ``decode(bytes) -> bytes``. ``ConfigError`` says what is wrong."""
    import importlib

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"a codec is named module:factory (e.g. myapp.crypto:make_codec), got {spec!r}")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"codec {spec!r} not found: {exc}") from exc
    try:
        codec = factory()
    except Exception as exc:
        raise ConfigError(f"codec factory {spec!r} failed: {type(exc).__name__}: {exc}") from exc
    if not (callable(getattr(codec, "encode", None)) and callable(getattr(codec, "decode", None))):
        raise ConfigError(f"codec {spec!r} gave {type(codec).__name__}, which has no encode(bytes) and decode(bytes)")
    checked: PayloadCodec = codec
    return checked
