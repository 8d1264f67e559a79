"""History events as JSON-friendly dicts, for the CLI, the gateway and ``handle.history()``."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from .errors import SchemaError
from .payload import JsonConverter, PayloadConverter

__all__ = ["event_from_json", "event_to_json"]

_PAYLOAD_FIELDS = ("input", "result", "details")


def _plain(value: Any, converter: PayloadConverter) -> Any:
    if isinstance(value, tuple):  # a union branch: (record name, value)
        return {"type": value[0], **_plain(value[1], converter)}
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in _PAYLOAD_FIELDS and isinstance(v, (bytes, bytearray)):
                try:
                    out[k] = converter.from_bytes(bytes(v))
                except SchemaError:
                    out[k] = {"base64": base64.b64encode(v).decode()}
            else:
                out[k] = _plain(v, converter)
        return out
    if isinstance(value, list):
        return [_plain(v, converter) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return {"base64": base64.b64encode(value).decode()}
    return value


def event_to_json(event: dict[str, Any], converter: PayloadConverter | None = None) -> dict[str, Any]:
    converter = converter or JsonConverter()
    kind, attrs = event["attributes"]
    out = {
        "seq": event["seq"],
        "type": kind,
        "time": datetime.fromtimestamp(event["timestamp_ms"] / 1000, tz=UTC).isoformat(),
        "workflow_id": event["aggregate_key"],
        "run_id": event["run_id"],
        "attributes": _plain(attrs, converter),
    }
    if event.get("request_id"):
        out["request_id"] = event["request_id"]
    if event.get("_offset") is not None:
        out["offset"] = event["_offset"]
    return out


def _unplain(value: Any, converter: PayloadConverter, key: str | None = None) -> Any:
    if key in _PAYLOAD_FIELDS:
        if isinstance(value, dict) and set(value) == {"base64"}:
            return base64.b64decode(value["base64"])
        return None if value is None and key == "details" else converter.to_bytes(value)
    if isinstance(value, dict):
        if set(value) == {"base64"}:
            return base64.b64decode(value["base64"])
        return {k: _unplain(v, converter, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_unplain(v, converter) for v in value]
    return value


def event_from_json(data: dict[str, Any], converter: PayloadConverter | None = None) -> dict[str, Any]:
    """The inverse of ``event_to_json``: an exported event back to the record form replay uses."""
    converter = converter or JsonConverter()
    try:
        ts = int(datetime.fromisoformat(data["time"]).timestamp() * 1000)
        return {
            "event_id": data.get("event_id", ""),
            "aggregate_key": data["workflow_id"],
            "run_id": data["run_id"],
            "seq": int(data["seq"]),
            "timestamp_ms": ts,
            "trace_id": None,
            "request_id": data.get("request_id"),
            "attributes": (data["type"], _unplain(data["attributes"], converter)),
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise SchemaError(f"not an exported history event: {exc}") from exc
