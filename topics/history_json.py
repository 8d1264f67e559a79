"""History events as JSON-friendly dicts, for the CLI, the gateway and ``handle.history()``."""

from __future__ import annotations

import base64
from datetime import datetime, timezone

from .payload import JsonConverter
from .errors import SchemaError

__all__ = ["event_to_json"]

_PAYLOAD_FIELDS = ("input", "result", "details")


def _plain(value, converter: JsonConverter):
    if isinstance(value, tuple):  # a union branch: (record name, value)
        return {"type": value[0], **_plain(value[1], converter)}
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in _PAYLOAD_FIELDS and isinstance(v, (bytes, bytearray)):
                try:
                    out[k] = converter.from_bytes(v)
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


def event_to_json(event: dict, converter: JsonConverter | None = None) -> dict:
    converter = converter or JsonConverter()
    kind, attrs = event["attributes"]
    out = {
        "seq": event["seq"],
        "type": kind,
        "time": datetime.fromtimestamp(event["timestamp_ms"] / 1000, tz=timezone.utc).isoformat(),
        "workflow_id": event["aggregate_key"],
        "run_id": event["run_id"],
        "attributes": _plain(attrs, converter),
    }
    if event.get("_offset") is not None:
        out["offset"] = event["_offset"]
    return out
