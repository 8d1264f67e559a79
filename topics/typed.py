"""Typed payloads: Python values <-> JSON values, by the type hints of the functions that take
and return them.

Payloads travel as JSON (``payload.JsonConverter``). On the way out any value pydantic can
serialize becomes JSON: dataclasses, pydantic models, enums, datetimes, UUIDs, decimals, sets,
and containers of those (``to_jsonable``). On the way in, a value is validated into the type its
receiver declares: a workflow's run method, signal and query handlers, an activity's parameters,
and the return annotation of an activity, a child workflow or a workflow whose result a client
awaits (``Signature``). The conversion is pydantic's own ``TypeAdapter`` (lax mode: an ISO string
becomes a ``datetime``, a dict a dataclass or model), built once per function and type. A
parameter without an annotation, or annotated ``Any``/``object``, gets the decoded JSON as it is,
as before typed payloads existed. Bad input raises ``PayloadTypeError`` naming the argument and
the field path, never the value (payloads stay out of messages and logs).
"""

from __future__ import annotations

import functools
import inspect
import logging
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from .errors import PayloadTypeError

__all__ = ["Signature", "adapter", "convert", "signature", "to_jsonable"]

log = logging.getLogger(__name__)

#: hints that mean "whatever the JSON decodes to"
_UNTYPED = (Any, object, inspect.Parameter.empty)


def to_jsonable(value: Any) -> Any:
    """``json.dumps``'s ``default``: called only for what JSON cannot hold as it is."""
    try:
        return to_jsonable_python(value)
    except Exception as exc:  # noqa: BLE001 - pydantic's serialization errors vary by type
        raise TypeError(f"{type(value).__name__} is not JSON-serializable: {exc}") from None


def _build(hint: Any) -> TypeAdapter[Any] | None:
    try:
        return TypeAdapter(hint)
    except Exception as exc:  # noqa: BLE001 - pydantic's schema errors (a class it cannot validate into)
        log.warning(
            "payloads of type %s stay as decoded: pydantic cannot convert into it (%s)",
            getattr(hint, "__qualname__", hint),
            type(exc).__name__,
        )
        return None


@functools.lru_cache(maxsize=4096)
def _cached_adapter(hint: Any) -> TypeAdapter[Any] | None:
    return _build(hint)


def adapter(hint: Any) -> TypeAdapter[Any] | None:
    """The validator for ``hint`` (None: untyped, the value passes as decoded: also for a class
    pydantic has no schema for, such as a plain class without annotations)."""
    if hint is None or any(hint is u for u in _UNTYPED):
        return None
    try:
        return _cached_adapter(hint)
    except TypeError:  # an unhashable hint: built each time
        return _build(hint)


@dataclass(frozen=True)
class Signature:
    """The validators of a function's positional parameters, its ``*args`` and its result."""

    params: tuple[tuple[str, TypeAdapter[Any] | None], ...]
    varargs: TypeAdapter[Any] | None
    returns: TypeAdapter[Any] | None
    #: False when no parameter and no result is typed: values pass through untouched
    typed: bool

    def args(self, values: list[Any], what: str) -> list[Any]:
        """``values`` (decoded JSON) validated into the parameters' types."""
        if not self.typed:
            return values
        params, out = self.params, []
        for i, value in enumerate(values):
            if i < len(params):
                name, ad = params[i]
            else:  # more values than parameters: *args, or the call itself reports it
                name, ad = f"*args[{i - len(params)}]", self.varargs
            out.append(value if ad is None else convert(value, ad, f"{what}, argument {name!r}", field=name))
        return out

    def result(self, value: Any, what: str) -> Any:
        return value if self.returns is None else convert(value, self.returns, f"{what}, result", field="result")


_PLAIN = Signature((), None, None, False)


@functools.lru_cache(maxsize=4096)
def signature(fn: Callable[..., Any], *, method: bool = False) -> Signature:
    """The validators of ``fn`` (``method``: skip its first parameter, ``self``). Annotations that
    do not resolve (a class defined inside a function, under ``from __future__ import
    annotations``) leave the function untyped, with a debug line saying so."""
    try:
        hints = typing.get_type_hints(fn)
        params = list(inspect.signature(fn).parameters.values())
    except (NameError, TypeError, ValueError) as exc:
        log.debug(
            "type hints of %s not resolved (%s); its payloads stay as decoded", getattr(fn, "__qualname__", fn), exc
        )
        return _PLAIN
    if method and params:
        params = params[1:]
    positional, varargs = [], None
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional.append((p.name, adapter(hints.get(p.name, inspect.Parameter.empty))))
        elif p.kind is p.VAR_POSITIONAL:
            varargs = adapter(hints.get(p.name, inspect.Parameter.empty))
    returns = adapter(hints.get("return", inspect.Parameter.empty))
    typed = returns is not None or varargs is not None or any(ad is not None for _, ad in positional)
    return Signature(tuple(positional), varargs, returns, typed)


def convert(value: Any, ad: TypeAdapter[Any], what: str, *, field: str | None = None) -> Any:
    """``value`` validated by ``ad``; ``PayloadTypeError`` naming ``what`` and each bad field."""
    try:
        return ad.validate_python(value)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(part) for part in err['loc']) or '(the value)'}: {err['msg']}"
            for err in exc.errors(include_url=False, include_input=False)[:5]
        ]
        more = exc.error_count() - len(problems)
        raise PayloadTypeError(
            f"{what} does not match its type: {'; '.join(problems)}" + (f" (and {more} more)" if more > 0 else ""),
            field=field,
        ) from None
