"""Search attributes: the typed values a run is listed and found by.

A value is a keyword (``str``), a keyword list (``list[str]``), an ``int`` (64-bit), a ``float``
(finite), a ``bool`` or a timezone-aware ``datetime``. Anything else is refused at the call, before
anything is sent, with ``InvalidIdentifierError`` naming the attribute.

Three forms, one per place a value travels:

* Python (``check_search_attributes`` takes it, ``from_wire`` gives it back): as above;
* wire (the Avro union of the records, schema version 13): the same, except that a datetime is
  ``{"epoch_us": <microseconds since the epoch, UTC>}`` (the ``SearchAttributeTime`` record);
* JSON (describe, the gateway, the CLI, the visibility projection): the wire form, except that a
  datetime is ``{"datetime": "<ISO 8601, UTC>"}`` (``to_json``; ``from_json`` reads it back).

``index_terms`` gives the strings a value is indexed and matched by: a keyword itself, one term
per element of a keyword list (a filter on one keyword matches a list that holds it), numbers in
one canonical form (``2`` and ``2.0`` match), ``true``/``false``, and ISO 8601 UTC for a datetime.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from typing import Any

from .errors import InvalidIdentifierError
from .identifiers import check_name

__all__ = [
    "SearchAttributeValue",
    "check_search_attributes",
    "from_json",
    "from_wire",
    "index_terms",
    "json_terms",
    "to_json",
]

#: what a search attribute holds, in Python
SearchAttributeValue = str | int | float | bool | _dt.datetime | list[str]

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_TYPES = "a str, a list of str, an int, a float, a bool or a timezone-aware datetime"


def _refuse(key: str, why: str) -> InvalidIdentifierError:
    return InvalidIdentifierError(f"search attribute {key!r} {why}", field=f"search_attributes.{key}")


def _wire_value(key: str, item: object) -> Any:
    if isinstance(item, str | bool):
        return item
    if isinstance(item, int):
        if not _LONG_MIN <= item <= _LONG_MAX:
            raise _refuse(key, f"is an int outside 64 bits ({item})")
        return item
    if isinstance(item, float):
        if not math.isfinite(item):
            raise _refuse(key, f"is not a finite float ({item})")
        return item
    if isinstance(item, _dt.datetime):
        if item.tzinfo is None or item.utcoffset() is None:
            raise _refuse(key, f"is a naive datetime ({item.isoformat()}); give it a time zone, e.g. tzinfo=UTC")
        delta = item - _EPOCH
        return {"epoch_us": (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds}
    if isinstance(item, list | tuple):
        for i, element in enumerate(item):
            if not isinstance(element, str):
                raise _refuse(key, f"is a list whose item {i} is a {type(element).__name__}; a keyword list holds str")
        return list(item)
    raise _refuse(key, f"has a {type(item).__name__} value ({item!r:.40}); a value is {_TYPES}")


def check_search_attributes(value: object) -> dict[str, Any]:
    """``value`` (a dict of names to Python values, or None) in wire form; anything else is an
    ``InvalidIdentifierError`` naming the attribute."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidIdentifierError(
            f"search attributes are a dict of names to values, not {type(value).__name__}", field="search_attributes"
        )
    out: dict[str, Any] = {}
    for key, item in value.items():
        check_name(key, field="search attribute name")
        out[key] = _wire_value(key, item)
    return out


def _from_epoch_us(us: int) -> _dt.datetime:
    return _EPOCH + _dt.timedelta(microseconds=us)


def from_wire(attrs: Mapping[str, Any] | None) -> dict[str, SearchAttributeValue]:
    """Wire form -> Python values (a datetime back as an aware datetime in UTC)."""
    out: dict[str, SearchAttributeValue] = {}
    for key, v in (attrs or {}).items():
        out[key] = _from_epoch_us(v["epoch_us"]) if isinstance(v, dict) else (list(v) if isinstance(v, list) else v)
    return out


def _iso(us: int) -> str:
    return _from_epoch_us(us).isoformat().replace("+00:00", "Z")


def to_json(attrs: Mapping[str, Any] | None) -> dict[str, Any]:
    """Wire form -> JSON form (a datetime is ``{"datetime": "<ISO 8601>"}``)."""
    out: dict[str, Any] = {}
    for key, v in (attrs or {}).items():
        out[key] = {"datetime": _iso(v["epoch_us"])} if isinstance(v, dict) else v
    return out


def from_json(attrs: object) -> dict[str, Any]:
    """JSON form (a gateway request's) -> wire form, checked as ``check_search_attributes`` does;
    ``{"datetime": "<ISO 8601 with an offset>"}`` is a datetime."""
    if not isinstance(attrs, Mapping):
        return check_search_attributes(attrs)
    python: dict[str, object] = {}
    for key, v in attrs.items():
        if isinstance(v, Mapping):
            text = v.get("datetime")
            if set(v) != {"datetime"} or not isinstance(text, str):
                raise _refuse(str(key), 'is an object; the only object value is {"datetime": "<ISO 8601>"}')
            try:
                v = _dt.datetime.fromisoformat(text)
            except ValueError:
                raise _refuse(str(key), f"has a datetime that is not ISO 8601 ({text!r:.40})") from None
        python[key] = v
    return check_search_attributes(python)


def _number_term(v: int | float) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**63:
        v = int(v)
    return repr(v)


def index_terms(value: Any) -> list[str]:
    """The terms a wire-form value is indexed and matched by."""
    if isinstance(value, bool):
        return ["true" if value else "false"]
    if isinstance(value, str):
        return [value]
    if isinstance(value, int | float):
        return [_number_term(value)]
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, dict):
        return [_iso(value["epoch_us"])]
    raise TypeError(f"not a search attribute value in wire form: {type(value).__name__}")


def json_terms(value: Any) -> list[str]:
    """The terms of a JSON-form value (a projection record's)."""
    if isinstance(value, dict):
        return [str(value.get("datetime", ""))]
    return index_terms(value)
