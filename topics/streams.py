"""Workflow streams (decision 0062): the names, the limits and the records of ``{ns}.streams``,
shared by the publishers (workflow code, activity attempts), the processor that writes them and
the readers (``handle.stream`` in the SDK, Server-Sent Events in the gateway).

A record is keyed by its workflow ID and lies in the partition Kafka's default partitioner gives
that key over the topic's own partition count (``stream_partition``); its offset there is its
event ID (``Last-Event-ID``): a reader resumes after it."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from . import serde
from .errors import ConfigError, PayloadTooLargeError, SchemaError
from .identifiers import check_name
from .partitioner import partition_for

__all__ = [
    "MAX_ATTEMPT_BYTES",
    "MAX_VALUE_BYTES",
    "STREAMS_VERSION",
    "PublishBuffer",
    "StreamEntry",
    "check_stream",
    "check_streams_writable",
    "check_value",
    "entry_from_record",
    "entry_of",
    "stream_partition",
]

log = logging.getLogger(__name__)

#: the schema version that has streams: a process pinned to an older one cannot publish
STREAMS_VERSION = 20
#: one value, encoded (a larger one belongs in a large-payload store: the codec's reference is small)
MAX_VALUE_BYTES = 256 * 1024
#: everything one activity attempt publishes: it rides on the attempt's completion record
MAX_ATTEMPT_BYTES = 768 * 1024


def check_stream(name: object) -> str:
    """``name`` if it is a valid stream name (a name like a signal's); ``InvalidIdentifierError`` if not."""
    return check_name(name, field="stream")


def check_streams_writable() -> None:
    """``ConfigError`` when this process writes a schema version without streams (a rolling
    upgrade's first pass: ``KADENCE_SCHEMA_WRITE_VERSION``): publishing would fail later, or
    an activity's values would be left out of its completion."""
    version = serde.write_version()
    if version < STREAMS_VERSION:
        raise ConfigError(
            f"this process writes schema version {version} ({serde.WRITE_VERSION_ENV}); workflow streams "
            f"need version {STREAMS_VERSION}: lift the pin once every instance runs this release"
        )


def check_value(stream: str, value: bytes) -> bytes:
    if len(value) > MAX_VALUE_BYTES:
        raise PayloadTooLargeError(
            f"a value of {len(value)} bytes for stream {stream!r} is over the limit of {MAX_VALUE_BYTES} "
            "(configure a large-payload codec: its references are small)"
        )
    return value


class PublishBuffer:
    """What one activity attempt has published so far, sent with its completion and written only
    if the engine accepts that completion (``MAX_ATTEMPT_BYTES`` in all)."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.size = 0

    def add(self, stream: str, value: bytes) -> None:
        check_value(stream, value)
        size = self.size + len(value) + len(stream)
        if size > MAX_ATTEMPT_BYTES:
            raise PayloadTooLargeError(
                f"an activity attempt may publish {MAX_ATTEMPT_BYTES} bytes in all; this value of {len(value)} "
                f"bytes for stream {stream!r} would make {size}"
            )
        self.items.append({"stream": stream, "value": value})
        self.size = size


def stream_partition(workflow_id: str, partitions: int) -> int:
    """The partition of ``{ns}.streams`` that holds ``workflow_id``'s records."""
    return partition_for(workflow_id, partitions)


@dataclass(frozen=True)
class StreamEntry:
    """One record of a workflow's stream as a reader sees it. ``offset`` is its event ID.
    ``end``: the workflow closed; nothing follows on any of its streams."""

    offset: int
    workflow_id: str
    run_id: str
    stream: str
    value: bytes | None
    activity_id: str | None
    attempt: int
    history_seq: int
    timestamp_ms: int
    end: bool


def entry_of(msg: Any) -> StreamEntry | None:
    """The entry of a consumed ``{ns}.streams`` record (None, logged, for one that does not decode)."""
    try:
        rec = serde.decode("StreamRecord", msg.value())
    except SchemaError as exc:
        log.error("undecodable stream record at %s[%d]@%d: %s", msg.topic(), msg.partition(), msg.offset(), exc)
        return None
    return entry_from_record(msg.offset(), rec)


def entry_from_record(offset: int, rec: Any) -> StreamEntry:
    """The entry of a decoded ``StreamRecord`` at ``offset``."""
    return StreamEntry(
        offset=offset,
        workflow_id=rec["workflow_id"],
        run_id=rec["run_id"],
        stream=rec["stream"],
        value=rec.get("value"),
        activity_id=rec.get("activity_id"),
        attempt=rec.get("attempt", 0),
        history_seq=rec["history_seq"],
        timestamp_ms=rec["timestamp_ms"],
        end=bool(rec.get("end")),
    )
