"""Avro serialization of every Kadence record.

fastavro parses and validates the schemas and resolves records written with an older schema
version; records of the current version are written and read by functions generated from the
schema (``kadence.topics.avro_codegen``, several times faster on records this small).

Wire format: ``b"K" + version (1 byte) + Avro binary body``. The version names the frozen schema
set in ``kadence.schemas`` that wrote the record, so old records decode with today's schemas by
Avro schema resolution. No schema registry is needed: the schema sets ship with the code.

The public topics may also hold records in the Confluent wire format, ``b"\\0"`` + a 4-byte schema
ID of a schema registry + the same Avro body (``kadence.topics.schema_registry``, decision 0056):
``decode`` reads both; ``RegistryCodec`` writes the registry's.

Records are plain dicts. A union of records (a command's ``body``, an event's ``attributes``) is
written and read as a ``(short_name, dict)`` tuple.
"""

from __future__ import annotations

import io
import logging
import os
import struct
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

import fastavro
from fastavro.read import SchemaResolutionError

from kadence.schemas import CURRENT_VERSION, available_versions, load_schema_set

from .avro_codegen import compile_reader, compile_writer
from .errors import ConfigError, SchemaError, SchemaNotRegisteredError
from .standalone_schemas import self_contained

if TYPE_CHECKING:
    from .catalogue import Catalogue
    from .schema_registry import SchemaRegistry

__all__ = [
    "MAGIC",
    "WRITE_VERSION_ENV",
    "Codec",
    "RegistryCodec",
    "codec",
    "decode",
    "encode",
    "fallbacks",
    "old_version_decodes",
    "public_codecs",
    "topic_codec",
    "write_version",
]

log = logging.getLogger(__name__)

MAGIC = 0x4B  # "K"
#: a record in the Confluent wire format starts with this byte, then a 4-byte schema ID
CONFLUENT_MAGIC = 0
#: the schema registry that resolves Confluent-format records (``KafkaConfig.schema_registry_url``)
REGISTRY_ENV = "KADENCE_SCHEMA_REGISTRY_URL"
_NS = "kadence."


def _strip_names(value: Any) -> Any:
    """fastavro returns fully qualified record names in union tuples; we use short names."""
    if isinstance(value, tuple):
        name, inner = value
        return (name[len(_NS) :] if name.startswith(_NS) else name, _strip_names(inner))
    if isinstance(value, dict):
        return {k: _strip_names(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strip_names(v) for v in value]
    return value


def _bytes_defaults(schema: Any) -> None:
    """Avro writes a bytes field's default as a JSON string (code points 0-255 are the bytes), and
    fastavro uses that str as is, both to fill a field the writer left out (then fails to encode
    it) and for a field only the reader has (then hands a str where bytes belong). Make such
    defaults bytes, in place, after fastavro has validated the schema."""
    if isinstance(schema, list):
        for branch in schema:
            _bytes_defaults(branch)
    elif isinstance(schema, dict):
        if schema.get("type") == "record":
            for f in schema["fields"]:
                first = f["type"][0] if isinstance(f["type"], list) and f["type"] else f["type"]
                if first == "bytes" and isinstance(f.get("default"), str):
                    f["default"] = f["default"].encode("latin-1")
                _bytes_defaults(f["type"])
        elif schema.get("type") == "array":
            _bytes_defaults(schema["items"])
        elif schema.get("type") == "map":
            _bytes_defaults(schema["values"])


#: the environment variable that pins the schema version this process writes (a rolling upgrade)
WRITE_VERSION_ENV = "KADENCE_SCHEMA_WRITE_VERSION"


@cache
def write_version() -> int:
    """The schema version this process writes: ``KADENCE_SCHEMA_WRITE_VERSION`` when set (a
    frozen version no newer than the current one), else the current version.

    A rolling upgrade runs the new release with the variable set to the version the old release
    writes, so instances not yet upgraded can read everything; once none is left, the variable is
    removed and instances restarted (docs/guide.md, "Upgrading Kadence itself"). Records are read in every version either
    way. A record type or union branch the pinned version does not have cannot be written: what
    needs it fails with ``SchemaError`` until the pin is lifted. Read once per process (the wire
    format of a process does not change while it runs); ``ConfigError`` for a bad value."""
    raw = os.environ.get(WRITE_VERSION_ENV, "").strip()
    if not raw:
        return CURRENT_VERSION
    try:
        version = int(raw)
    except ValueError:
        raise ConfigError(f"{WRITE_VERSION_ENV}={raw!r} is not a schema version number") from None
    if version not in available_versions() or version > CURRENT_VERSION:
        raise ConfigError(
            f"{WRITE_VERSION_ENV}={version}: this release writes schema versions "
            f"{available_versions()[0]} to {CURRENT_VERSION}"
        )
    if version != CURRENT_VERSION:
        log.warning(
            "writing records in schema version %d (%s), not the current %d: lift the pin once every instance is upgraded (decision 0046)",
            version,
            WRITE_VERSION_ENV,
            CURRENT_VERSION,
        )
    return version


@cache
def _parsed(version: int | None) -> dict[str, Any]:
    named: dict[str, Any] = {}
    parsed: dict[str, Any] = {}
    for schema in load_schema_set(version):
        parsed[_NS + schema["name"]] = fastavro.parse_schema(schema, named_schemas=named)
    for schema in parsed.values():
        _bytes_defaults(schema)
    return parsed


class Codec:
    """Encoder/decoder of one record type across all schema versions."""

    def __init__(self, record: str) -> None:
        self.record = record
        full = _NS + record
        current = _parsed(None)
        if full not in current:
            raise SchemaError(f"unknown record type {record!r}")
        self._schema = current[full]
        self._writers = {v: _parsed(v).get(full) for v in available_versions()}
        self.write_version = write_version()
        self._prefix = bytes((MAGIC, self.write_version))
        pinned = self._writers.get(self.write_version)
        #: (direction, outcome) -> values and records the generated functions could not handle
        #: and the closure codecs took over (``avro_codegen.OnFallback``)
        self.fallbacks: dict[tuple[str, str], int] = {}
        if self.write_version == CURRENT_VERSION:
            self._put = compile_writer(self._schema, self._fell_back)
        elif pinned is not None:
            # pinned: the generated writer of that version's schema (fields added since are left
            # out; a union branch it does not know fails to encode)
            self._put = compile_writer(pinned, self._fell_back)
        else:
            self._put = self._absent_in_pinned_version
        self._get = compile_reader(self._schema, self._fell_back)
        self._standalone_schema: Any = None
        #: (registry URL, schema ID) -> whether that schema is today's (the generated reader reads it)
        self._current_ids: dict[tuple[str, int], bool] = {}
        #: the schema IDs this process writes this record with (``RegistryCodec``)
        self._written_ids: set[int] = set()
        #: records of an older schema version decoded (through fastavro, not the generated
        #: reader), by version: a rolling upgrade's old records, or a writer pinned to an old version
        self.old_version_decodes: dict[int, int] = {}

    def _fell_back(self, direction: str, outcome: str, exc: BaseException) -> None:
        """Count a fallback to the closure codec; a recovered one is a gap in the generated code
        (a warning), a refused one a bad value or record that the caller gets a SchemaError for.
        The error's type only: its text may quote the value."""
        key = (direction, outcome)
        self.fallbacks[key] = self.fallbacks.get(key, 0) + 1
        if outcome == "recovered":
            log.warning(
                "the generated %s of %s failed (%s) where the closure codec did not; counted in "
                "kadence_codec_fallbacks_total",
                "writer" if direction == "write" else "reader",
                self.record,
                type(exc).__name__,
            )
        else:
            log.debug("%s of a %s refused by both codecs (%s)", direction, self.record, type(exc).__name__)

    def _absent_in_pinned_version(self, _buf: bytearray, _value: dict[str, Any]) -> None:
        raise ValueError(
            f"schema version {self.write_version} ({WRITE_VERSION_ENV}) has no {self.record} record; "
            "lift the pin once every instance is upgraded"
        )

    def encode(self, value: Mapping[str, Any], prefix: bytes | None = None) -> bytes:
        """The record in Kadence's format, or after ``prefix`` (a registry's, ``RegistryCodec``)."""
        buf = bytearray(self._prefix if prefix is None else prefix)
        try:
            self._put(buf, value)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError, struct.error) as exc:
            raise SchemaError(f"cannot encode {self.record}: {exc}") from exc
        return bytes(buf)

    def decode(self, data: bytes | None, registry: SchemaRegistry | None = None) -> dict[str, Any]:
        """A record in Kadence's format, or in the Confluent wire format: its schema ID is
        resolved by ``registry``, else by the one ``KADENCE_SCHEMA_REGISTRY_URL`` names."""
        if data and len(data) >= 5 and data[0] == CONFLUENT_MAGIC:
            return self._decode_registered(data, registry)
        if not data or len(data) < 2 or data[0] != MAGIC:
            raise SchemaError(f"not a Kadence {self.record} record (bad magic byte)")
        version = data[1]
        writer = self._writers.get(version)
        if writer is None:
            raise SchemaError(f"{self.record} written with unknown schema version {version}")
        if version == CURRENT_VERSION:
            try:
                value, end = self._get(data, 2)
            except (EOFError, ValueError, TypeError, IndexError, KeyError, UnicodeDecodeError, struct.error) as exc:
                raise SchemaError(f"cannot decode {self.record} (schema v{version}): {exc}") from exc
            if end != len(data):
                raise SchemaError(f"trailing bytes after {self.record} record")
            record: dict[str, Any] = value
            return record
        # an older schema version: fastavro resolves it to the current schema (slower; counted)
        seen = self.old_version_decodes.get(version, 0)
        self.old_version_decodes[version] = seen + 1
        if not seen:
            log.info(
                "decoding %s records of schema version %d (current: %d) through fastavro's schema resolution; "
                "counted in kadence_codec_old_version_decodes_total",
                self.record,
                version,
                CURRENT_VERSION,
            )
        return self._resolve(data, 2, writer, f"schema v{version}")

    def _resolve(self, data: bytes, start: int, writer: Any, label: str, reader: Any = None) -> dict[str, Any]:
        """The body from ``start`` written with ``writer``, resolved into the current schema by
        fastavro (slower than the generated reader). ``reader``: the current schema parsed as
        ``writer`` was (self-contained, for a registry's schema), else the schema set's."""
        buf = io.BytesIO(data)
        buf.seek(start)
        try:
            value = fastavro.schemaless_reader(
                buf,
                writer,
                self._schema if reader is None else reader,
                return_record_name=True,
                return_record_name_override=True,
            )
        except (
            SchemaResolutionError,
            EOFError,
            ValueError,
            TypeError,
            IndexError,
            KeyError,
            UnicodeDecodeError,
        ) as exc:
            raise SchemaError(f"cannot decode {self.record} ({label}): {exc}") from exc
        if buf.tell() != len(data):
            raise SchemaError(f"trailing bytes after {self.record} record")
        stripped: dict[str, Any] = _strip_names(value)
        return stripped

    def current_body(self, raw: bytes) -> bytes | None:
        """The Avro body of a record written in the version this process writes, in either format
        (a registry's schema ID known here to be that version's), else None: such a body can be
        passed on without decoding it (``Encoded``)."""
        if raw[0] == MAGIC:
            return raw[2:] if raw[1] == self.write_version else None
        if raw[0] == CONFLUENT_MAGIC and int.from_bytes(raw[1:5], "big") in self._written_ids:
            return raw[5:]
        return None

    def _decode_registered(self, data: bytes, registry: SchemaRegistry | None) -> dict[str, Any]:
        schema_id = int.from_bytes(data[1:5], "big")
        registry = registry or _process_registry()
        if registry is None:
            raise SchemaError(
                f"a {self.record} record in the Confluent wire format (schema ID {schema_id}), and no "
                f"schema registry to resolve it: set {REGISTRY_ENV}"
            )
        key = (registry.url, schema_id)
        current = self._current_ids.get(key)  # after the first record of an ID: no look-up at all
        if current is None:
            canonical = self._writer(registry, schema_id)[1]
            current = self._current_ids.setdefault(key, canonical == registry.current_canonical(self.record))
        if current:
            try:
                value, end = self._get(data, 5)
            except (EOFError, ValueError, TypeError, IndexError, KeyError, UnicodeDecodeError, struct.error) as exc:
                raise SchemaError(f"cannot decode {self.record} (schema ID {schema_id}): {exc}") from exc
            if end != len(data):
                raise SchemaError(f"trailing bytes after {self.record} record")
            record: dict[str, Any] = value
            return record
        writer = self._writer(registry, schema_id)[0]
        return self._resolve(data, 5, writer, f"schema ID {schema_id}", self._standalone())

    def _writer(self, registry: SchemaRegistry, schema_id: int) -> tuple[Any, str]:
        try:
            return registry.writer_schema(schema_id)
        except SchemaNotRegisteredError as exc:
            raise SchemaError(f"a {self.record} record names schema ID {schema_id}, which {exc}") from None

    def _standalone(self) -> Any:
        """Today's schema of this record, self-contained and parsed on its own: the reader a
        registry's (self-contained) writer schema resolves into."""
        if self._standalone_schema is None:
            parsed = fastavro.parse_schema(self_contained(self.record))
            _bytes_defaults(parsed)
            self._standalone_schema = parsed
        return self._standalone_schema


class RegistryCodec:
    """A codec that writes the Confluent wire format with the schema ID ``registry`` has for the
    record under ``topic``'s subject (looked up once, here: ``SchemaNotRegisteredError`` or
    ``SchemaRegistryUnavailableError`` now, not at the first write), and reads both formats."""

    def __init__(self, record: str, topic: str, registry: SchemaRegistry) -> None:
        self.codec = codec(record)
        self.record, self.topic, self.registry = record, topic, registry
        self.schema_id = registry.schema_id(topic, record, self.codec.write_version)
        self.codec._written_ids.add(self.schema_id)
        self._prefix = bytes((CONFLUENT_MAGIC,)) + self.schema_id.to_bytes(4, "big")

    def encode(self, value: Mapping[str, Any]) -> bytes:
        return self.codec.encode(value, self._prefix)

    def decode(self, data: bytes | None) -> dict[str, Any]:
        return self.codec.decode(data, self.registry)


#: the last (KADENCE_SCHEMA_REGISTRY_URL, its registry) resolved: a restore reads thousands of records
_ENV_REGISTRY: list[Any] = [None, None]


def _process_registry() -> SchemaRegistry | None:
    """The registry that resolves a schema ID read without one given: ``KADENCE_SCHEMA_REGISTRY_URL``,
    else the only one this process's components were configured with (``KafkaConfig``)."""
    url = os.environ.get(REGISTRY_ENV)
    if url:
        if url != _ENV_REGISTRY[0]:
            _ENV_REGISTRY[1], _ENV_REGISTRY[0] = _registry_of(url.strip()), url
        found: SchemaRegistry = _ENV_REGISTRY[1]
        return found
    from .schema_registry import only_registry  # (see _registry_of)

    return only_registry()


def _registry_of(url: str) -> SchemaRegistry:
    from .schema_registry import registry  # imported when a record needs it (see SchemaRegistry)

    return registry(url)


def public_codecs(topics: Catalogue) -> tuple[Codec | RegistryCodec, Codec | RegistryCodec, Codec | RegistryCodec]:
    """The codecs of a namespace's commands, history and replies (``topics``: its ``Catalogue``)."""
    url = topics.config.schema_registry_url
    return (
        topic_codec("Command", topics.commands, url),
        topic_codec("HistoryEvent", topics.history, url),
        topic_codec("Reply", topics.replies, url),
    )


def topic_codec(record: str, topic: str, registry_url: str) -> Codec | RegistryCodec:
    """The codec a writer of ``topic`` uses: the registry's format when ``registry_url`` is set
    and ``record`` is one of the public topics' records, else Kadence's."""
    if not registry_url:
        return codec(record)
    return RegistryCodec(record, topic, _registry_of(registry_url))


#: one codec per record type, made on first use (a cache: a codec is the same for every caller)
_CODECS: dict[str, Codec] = {}


def codec(record: str) -> Codec:
    found = _CODECS.get(record)
    if found is None:
        found = _CODECS.setdefault(record, Codec(record))
    return found


def old_version_decodes() -> dict[tuple[str, int], int]:
    """(record type, schema version) -> records of that older version decoded in this process."""
    return {
        (name, version): n for name, c in list(_CODECS.items()) for version, n in list(c.old_version_decodes.items())
    }


def fallbacks() -> dict[tuple[str, str, str], int]:
    """(record type, "write"/"read", "recovered"/"refused") -> fallbacks to the closure codecs."""
    return {(name, d, o): n for name, c in list(_CODECS.items()) for (d, o), n in list(c.fallbacks.items())}


def encode(record: str, value: Mapping[str, Any]) -> bytes:
    return codec(record).encode(value)


def decode(record: str, data: bytes | None) -> dict[str, Any]:
    return codec(record).decode(data)
