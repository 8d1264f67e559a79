"""The text of a workflow stream's values as Server-Sent Events carry them (``data:``), made once
per value for all of a gateway's readers (``RenderedValues``, one per gateway:
``GatewayContext.rendered``)."""

from __future__ import annotations

import base64
import collections
import json
from datetime import UTC, datetime

from kadence.topics.errors import SchemaError
from kadence.topics.payload import PayloadConverter
from kadence.topics.streams import StreamEntry

__all__ = ["RenderedValues"]


class RenderedValues:
    """The ``data:`` of recent stream entries, made once for all of a gateway's readers of them
    (its readers of one workflow get the same entries from its hub): one per gateway
    (``GatewayContext.rendered``), keyed by namespace too, since a workflow ID and an offset
    repeat across namespaces."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._done: collections.OrderedDict[tuple[str, str, int], str] = collections.OrderedDict()

    def get(self, namespace: str, entry: StreamEntry, converter: PayloadConverter) -> str:
        key = (namespace, entry.workflow_id, entry.offset)
        text = self._done.get(key)
        if text is None:
            text = self._done[key] = _data(entry, converter)
            if len(self._done) > self._size:
                self._done.popitem(last=False)
        return text


def _data(entry: StreamEntry, converter: PayloadConverter) -> str:
    try:
        value = converter.from_bytes(entry.value)
    except SchemaError:
        value = {"base64": base64.b64encode(entry.value or b"").decode()}
    return json.dumps(
        {
            "stream": entry.stream,
            "value": value,
            "run_id": entry.run_id,
            "activity_id": entry.activity_id,
            "attempt": entry.attempt,
            "time": datetime.fromtimestamp(entry.timestamp_ms / 1000, tz=UTC).isoformat(timespec="milliseconds"),
        },
        separators=(",", ":"),
        default=str,
    )
