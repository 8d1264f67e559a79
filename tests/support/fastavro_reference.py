"""fastavro as the reference the engine's own Avro codecs are checked against: values in
fastavro's form (fully qualified union names), schema sets parsed, records written."""

from __future__ import annotations

import copy
import io

import fastavro

from kadence.schemas import CURRENT_VERSION
from kadence.topics import serde

#: the schemas' namespace: fastavro's union tuples carry it, the engine's records do not
NS = "kadence."


def qualify(value):
    """Tuple notation with full names, as fastavro's writer wants it."""
    if isinstance(value, tuple):
        name, inner = value
        return (NS + name, qualify(inner))
    if isinstance(value, dict):
        return {k: qualify(v) for k, v in value.items()}
    if isinstance(value, list):
        return [qualify(v) for v in value]
    return value


def short_names(value):
    """fastavro's union tuples carry full names; the samples use short ones."""
    if isinstance(value, tuple):
        name, inner = value
        return (name[len(NS) :] if name.startswith(NS) else name, short_names(inner))
    if isinstance(value, dict):
        return {k: short_names(v) for k, v in value.items()}
    if isinstance(value, list):
        return [short_names(v) for v in value]
    return value


def parse_set(schema_set: list[dict]) -> dict:
    named: dict = {}
    return {s["name"]: fastavro.parse_schema(copy.deepcopy(s), named_schemas=named) for s in schema_set}


def write(parsed: dict, record: str, value: dict, version: int | None = None) -> bytes:
    buf = io.BytesIO()
    if version is not None:
        buf.write(b"K" + bytes([version]))
    fastavro.schemaless_writer(buf, parsed[record], qualify(value))
    return buf.getvalue()


def _fastavro_form(value):
    """A record as ``serde.encode`` hands it to the writer: full union names."""
    if isinstance(value, tuple):
        return (value[0] if "." in value[0] else NS + value[0], _fastavro_form(value[1]))
    if isinstance(value, dict):
        return {k: _fastavro_form(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fastavro_form(v) for v in value]
    return value


def fastavro_encode(record: str, value: dict) -> bytes:
    """``serde.encode`` done by fastavro (what it was before decision 0027)."""
    buf = io.BytesIO()
    buf.write(bytes((serde.MAGIC, CURRENT_VERSION)))
    fastavro.schemaless_writer(buf, serde.codec(record)._schema, _fastavro_form(value))
    return buf.getvalue()


def fastavro_decode(record: str, data: bytes) -> dict:
    """``serde.decode`` of a current-version record done by fastavro."""
    buf = io.BytesIO(data)
    buf.seek(2)
    return short_names(
        fastavro.schemaless_reader(
            buf, serde.codec(record)._schema, None, return_record_name=True, return_record_name_override=True
        )
    )
