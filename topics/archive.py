"""Archived histories: the archive store's interface (``ArchiveStore``) and configuration, the
container-file format, and the readers. The stores themselves (a directory, an S3 bucket) are
adapters in ``kadence.storage``.

The archiver (``kadence.connectors.archiver``) writes each closed run, after its retention, as
one Avro object container file (fastavro, deflate) and only then tombstones it from Kafka. The
gateway, the SDK client and the CLI read archived runs through the functions here, so they never
import ``connectors``.

Layout of an archive (one file per run)::

    {namespace}/{quoted workflow ID}/{run_id}.avro

Each file holds one ``ArchivedEvent`` record per history event, in seq order: the exact bytes
of the Kafka record (``value``, wire format ``b"K" + version + Avro body``, decodable with
``serde.decode("HistoryEvent", value)``), its key, and the partition and offset it had. The
file's metadata names the namespace, workflow ID, run ID and event count.

Readers (sync and async):

* ``read_archived_run(store, namespace, workflow_id, run_id) -> ArchivedRun | None``
* ``latest_archived_run(store, namespace, workflow_id) -> ArchivedRun | None``
* ``await read_history(engine, store, workflow_id, run_id=None) -> HistoryResult`` - Kafka
  first for the current run, the archive when the run is archived; ``HistoryResult.archived``
  says which.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import quote, unquote

import fastavro

from . import serde, settings
from .errors import ArchiveError, SchemaError, WorkflowNotFoundError
from .settings import setting

if TYPE_CHECKING:
    from .engine_client import EngineClient

__all__ = [
    "ARCHIVED_EVENT_SCHEMA",
    "ArchiveError",
    "ArchiveStore",
    "ArchiveStoreConfig",
    "ArchivedRun",
    "HistoryResult",
    "archive_key",
    "decode_archive",
    "encode_archive",
    "latest_archived_run",
    "read_archived_run",
    "read_history",
    "verify_archive",
]

log = logging.getLogger(__name__)

#: one record per history event in an archive container file
ARCHIVED_EVENT_SCHEMA = fastavro.parse_schema(
    {
        "type": "record",
        "name": "ArchivedEvent",
        "namespace": "kadence.archive",
        "doc": "A history event as it was on {ns}.history: key, Kafka value bytes, partition, offset.",
        "fields": [
            {"name": "seq", "type": "long"},
            {"name": "key", "type": "string"},
            {"name": "value", "type": "bytes", "doc": "the record's Kafka value: b'K' + version + HistoryEvent"},
            {"name": "partition", "type": "int"},
            {"name": "offset", "type": "long"},
        ],
    }
)
_CODEC = "deflate"


# -- stores --------------------------------------------------------------------------------------


@runtime_checkable
class ArchiveStore(Protocol):
    """Where archive files live. ``put`` is atomic: a reader sees the whole file or nothing."""

    def put(self, key: str, data: bytes) -> str: ...  # returns the file's URI
    def get(self, key: str) -> bytes | None: ...
    def list(self, prefix: str, suffix: str = ".avro") -> list[str]: ...
    def uri(self, key: str) -> str: ...
    def modified(self, key: str) -> float | None: ...  # epoch seconds of the last put; None: no such object
    def delete(self, key: str) -> None: ...


@dataclass(frozen=True, kw_only=True)
class ArchiveStoreConfig:
    """Where archives are written and read. Local directory unless ``s3_bucket`` is set."""

    directory: str = setting(
        os.path.join(os.path.expanduser("~"), ".local", "share", "kadence", "archive"),
        env="KADENCE_ARCHIVE_DIR",
        help="the local archive directory",
        option="--dir",
    )
    s3_bucket: str | None = setting(
        None, env="KADENCE_ARCHIVE_S3_BUCKET", help="use this S3-compatible bucket instead of the directory"
    )
    s3_prefix: str = setting("", env="KADENCE_ARCHIVE_S3_PREFIX", help="key prefix inside the bucket")
    s3_endpoint: str | None = setting(
        None, env="KADENCE_ARCHIVE_S3_ENDPOINT", help="endpoint URL of an S3-compatible service (MinIO, Ceph, ...)"
    )
    s3_region: str | None = setting(None, env="KADENCE_ARCHIVE_S3_REGION", help="the bucket's region")

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, variables: str = "KADENCE_ARCHIVE_", **overrides: Any
    ) -> ArchiveStoreConfig:
        """The settings from the environment; ``overrides`` that are not None win.
        ``variables``: the variables' prefix (``KADENCE_PAYLOAD_``: the payload store's)."""
        given = {k: v for k, v in overrides.items() if v is not None}
        return settings.from_env(cls, env, prefix=("KADENCE_ARCHIVE_", variables), **given)


# -- the container file ----------------------------------------------------------------------------


def _segment(text: str) -> str:
    """One path segment: URL-quoted, and never "." or ".." (those would name another folder)."""
    quoted = quote(text, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def archive_key(namespace: str, workflow_id: str, run_id: str) -> str:
    return f"{namespace}/{_segment(workflow_id)}/{_segment(run_id)}.avro"


@dataclass(frozen=True)
class ArchivedRun:
    namespace: str
    workflow_id: str
    run_id: str
    #: ArchivedEvent dicts: seq, key, value (Kafka bytes), partition, offset; seq order
    records: list[Any]

    def events(self) -> list[dict[str, Any]]:
        """The decoded history events, oldest first, each marked ``_archived``."""
        codec = serde.codec("HistoryEvent")
        out = []
        for r in self.records:
            ev = codec.decode(r["value"])
            ev["_offset"] = r["offset"]
            ev["_archived"] = True
            out.append(ev)
        return out

    @property
    def close_time_ms(self) -> int:
        return serde.decode("HistoryEvent", self.records[-1]["value"])["timestamp_ms"] if self.records else 0


def encode_archive(namespace: str, workflow_id: str, run_id: str, records: list[dict[str, Any]]) -> bytes:
    """A container file of ``records`` (ArchivedEvent dicts, seq order)."""
    buf = io.BytesIO()
    fastavro.writer(
        buf,
        ARCHIVED_EVENT_SCHEMA,
        records,
        codec=_CODEC,
        metadata={
            "kadence.namespace": namespace,
            "kadence.workflow_id": workflow_id,
            "kadence.run_id": run_id,
            "kadence.events": str(len(records)),
            "kadence.archived_at_ms": str(int(time.time() * 1000)),
        },
    )
    return buf.getvalue()


def decode_archive(data: bytes) -> ArchivedRun:
    try:
        reader = fastavro.reader(io.BytesIO(data))
        meta = reader.metadata
        records = list(reader)
        run = ArchivedRun(meta["kadence.namespace"], meta["kadence.workflow_id"], meta["kadence.run_id"], records)
        if int(meta["kadence.events"]) != len(records):
            raise ArchiveError(
                f"archive of {run.workflow_id}/{run.run_id} holds {len(records)} events, "
                f"its header says {meta['kadence.events']}"
            )
        return run
    except ArchiveError:
        raise
    except (ValueError, KeyError, EOFError, TypeError, StopIteration) as exc:
        raise ArchiveError(f"not a Kadence archive file: {exc}") from exc


def verify_archive(data: bytes, namespace: str, workflow_id: str, run_id: str, values: list[bytes]) -> ArchivedRun:
    """Decode ``data`` and check it is exactly this run: names, count, seq 1..n, byte-equal values,
    and every value a decodable history event of the run. Raises ``ArchiveError``."""
    run = decode_archive(data)
    where = f"{workflow_id}/{run_id}"
    if (run.namespace, run.workflow_id, run.run_id) != (namespace, workflow_id, run_id):
        raise ArchiveError(f"archive of {where} names {run.namespace}:{run.workflow_id}/{run.run_id}")
    if len(run.records) != len(values):
        raise ArchiveError(f"archive of {where} has {len(run.records)} events, expected {len(values)}")
    codec = serde.codec("HistoryEvent")
    for i, (rec, value) in enumerate(zip(run.records, values, strict=True), start=1):
        if rec["seq"] != i:
            raise ArchiveError(f"archive of {where}: event {i} has seq {rec['seq']}")
        if rec["value"] != value:
            raise ArchiveError(f"archive of {where}: event {i} differs from the history record")
        try:
            ev = codec.decode(rec["value"])
        except SchemaError as exc:
            raise ArchiveError(f"archive of {where}: event {i} does not decode: {exc}") from exc
        if (ev["aggregate_key"], ev["run_id"], ev["seq"]) != (workflow_id, run_id, i):
            raise ArchiveError(f"archive of {where}: event {i} belongs to {ev['aggregate_key']}/{ev['run_id']}")
    return run


# -- readers ------------------------------------------------------------------------------------------


def read_archived_run(store: ArchiveStore, namespace: str, workflow_id: str, run_id: str) -> ArchivedRun | None:
    """The archived run, or None when it is not archived."""
    data = store.get(archive_key(namespace, workflow_id, run_id))
    return None if data is None else decode_archive(data)


def latest_archived_run(store: ArchiveStore, namespace: str, workflow_id: str) -> ArchivedRun | None:
    """The archived run of ``workflow_id`` that closed last, or None."""
    best = None
    for key in store.list(f"{namespace}/{_segment(workflow_id)}/"):
        run_id = unquote(key.rsplit("/", 1)[1][: -len(".avro")])
        run = read_archived_run(store, namespace, workflow_id, run_id)
        if run is not None and (best is None or run.close_time_ms > best.close_time_ms):
            best = run
    return best


@dataclass(frozen=True)
class HistoryResult:
    run_id: str
    #: decoded HistoryEvent dicts, oldest first (archived ones carry ``_archived: True``)
    events: list[Any]
    archived: bool


async def read_history(
    engine: EngineClient, store: ArchiveStore | None, workflow_id: str, run_id: str | None = None
) -> HistoryResult:
    """A run's history from Kafka or, once archived, from the archive (async; store I/O runs in
    the default executor).

    ``engine`` is a ``kadence.topics.EngineClient``. With ``run_id``: the archive when that run
    is archived (a verified, byte-equal copy), else Kafka. Without: the workflow's current run as
    the processor knows it; when the processor has forgotten the workflow (purged after
    archival), the run archived last. Raises ``WorkflowNotFoundError`` when neither has it."""
    loop = asyncio.get_running_loop()
    ns = engine.config.namespace
    if store is not None and run_id is not None:
        run = await loop.run_in_executor(None, read_archived_run, store, ns, workflow_id, run_id)
        if run is not None:
            return HistoryResult(run_id, run.events(), True)
    try:
        rid, events = await engine.history(workflow_id, run_id)
    except WorkflowNotFoundError:
        if store is None:
            raise
        run = await loop.run_in_executor(None, latest_archived_run, store, ns, workflow_id)
        if run is None:
            raise
        return HistoryResult(run.run_id, run.events(), True)
    if not events and store is not None:  # tombstoned since the state was read: archived meanwhile
        run = await loop.run_in_executor(None, read_archived_run, store, ns, workflow_id, rid)
        if run is not None:
            return HistoryResult(rid, run.events(), True)
    if not events and run_id is not None:
        raise WorkflowNotFoundError(
            f"run {run_id!r} of workflow {workflow_id!r} not found", workflow_id=workflow_id, run_id=run_id
        )
    return HistoryResult(rid, events, False)
