"""The public topics' subjects in a schema registry with Confluent's API (decision 0056).

With ``KADENCE_SCHEMA_REGISTRY_URL`` set, the records Kadence writes to its public topics
(``commands``, ``replies``, ``history``) are in the Confluent wire format: the byte 0, the
registry's 4-byte schema ID, then the Avro body, the same body as in Kadence's own format
(``b"K"`` + schema version). Readers take both, so one topic can hold both during an upgrade.

- Subjects: one per public topic, ``{topic}-value`` (Confluent's topic name strategy), with the
  compatibility rule ``BACKWARD_TRANSITIVE`` (what ``tests/unit/test_schema_evolution.py``
  enforces on the schema store: today's reader reads every older version). ``register_topics``
  (``kadence topics apply``) registers the record's self-contained schema of every schema version
  in order, so the registry checks each step too.
- Writing: the schema ID of the version this process writes is looked up (not registered) under
  the topic's subject when a writer is made; a subject without it is ``SchemaNotRegisteredError``.
- Reading: a schema ID is resolved to its schema once per registry and cached; the body is
  decoded by Avro schema resolution into today's schema (``kadence.topics.serde``).

The HTTP client is confluent-kafka's ``SchemaRegistryClient`` (its ``schemaregistry`` extra), the
library the Kafka teams' own Python services use with the same registry.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import fastavro

from kadence.schemas import CURRENT_VERSION, available_versions, load_schema_set

from .errors import (
    ConfigError,
    IncompatibleSchemaError,
    SchemaNotRegisteredError,
    SchemaRegistryAccessError,
    SchemaRegistryUnavailableError,
)
from .standalone_schemas import self_contained

if TYPE_CHECKING:
    from .catalogue import Catalogue

__all__ = [
    "COMPATIBILITY",
    "CONFLUENT_MAGIC",
    "PUBLIC_RECORDS",
    "REGISTRY_ENV",
    "RegisteredSubject",
    "SchemaRegistry",
    "only_registry",
    "register_topics",
    "registry",
    "schema_text",
    "shown",
    "subject_of",
]

log = logging.getLogger(__name__)

#: the first byte of a record in the Confluent wire format (then a 4-byte big-endian schema ID)
CONFLUENT_MAGIC = 0
#: the environment variable naming the registry (``KafkaConfig.schema_registry_url``)
REGISTRY_ENV = "KADENCE_SCHEMA_REGISTRY_URL"
#: the compatibility rule each subject gets
COMPATIBILITY = "BACKWARD_TRANSITIVE"
#: record type -> the public topic (of a namespace) it is written to in the registry's format
PUBLIC_RECORDS = {"Command": "commands", "Reply": "replies", "HistoryEvent": "history"}

#: how many times a call is tried when the registry does not answer, and the first pause
_TRIES, _FIRST_PAUSE_S = 4, 0.25

T = TypeVar("T")


def subject_of(topic: str) -> str:
    """The subject of a topic's record values (Confluent's topic name strategy)."""
    return f"{topic}-value"


def shown(url: str) -> str:
    """A registry URL without its credentials, for logs and messages."""
    return re.sub(r"//[^/@]*@", "//***@", url)


def schema_text(record: str, version: int | None = None) -> str:
    """The self-contained schema of ``record`` in schema version ``version`` (None: the current
    one), as registered: compact JSON, so the registry and a reader see the same text."""
    return json.dumps(self_contained(record, load_schema_set(version)), separators=(",", ":"))


def _versions_with(record: str) -> list[int]:
    return [v for v in available_versions() if any(s["name"] == record for s in load_schema_set(v))]


class RegisteredSubject:
    """What ``register_topics`` did to one subject."""

    def __init__(self, subject: str, ids: list[int]) -> None:
        #: the subject, and the schema IDs of its versions, oldest first
        self.subject, self.ids = subject, ids

    def __repr__(self) -> str:
        return f"RegisteredSubject({self.subject!r}, ids={self.ids})"


class SchemaRegistry:
    """One registry: lookups and registrations, errors translated to Kadence's, schemas cached."""

    def __init__(self, url: str, *, client: Any = None) -> None:
        if not re.match(r"^https?://", url):
            raise ConfigError(f"{REGISTRY_ENV}={shown(url)!r} is not an http:// or https:// URL")
        self.url = url
        # imported here: a quarter of a second that a process without a registry does not pay
        from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
        from confluent_kafka.schema_registry.error import SchemaRegistryError as ClientError

        self._schema, self._client_error = Schema, ClientError
        self._transport_errors = _transport_errors()
        self._client = client if client is not None else SchemaRegistryClient({"url": url})
        self._lock = threading.Lock()
        #: schema ID -> the parsed writer schema
        self._writers: dict[int, Any] = {}
        #: schema ID -> its canonical form
        self._canonical: dict[int, str] = {}

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        pause = _FIRST_PAUSE_S
        for attempt in range(1, _TRIES + 1):
            try:
                return fn()
            except self._client_error as exc:
                status = exc.http_status_code
                if status in (401, 403):
                    raise SchemaRegistryAccessError(
                        f"the schema registry at {shown(self.url)} refused {what} (HTTP {status}): check "
                        f"the credentials in {REGISTRY_ENV} and the registry's roles"
                    ) from None
                if status == 404:
                    raise SchemaNotRegisteredError(
                        f"{what}: not in the schema registry at {shown(self.url)} (error {exc.error_code}); "
                        "run `kadence topics apply` with the registry configured"
                    ) from None
                if status in (409, 422) and "ncompatib" in str(exc.error_message):
                    raise IncompatibleSchemaError(
                        f"{what}: the schema registry refused the schema as incompatible ({COMPATIBILITY}): "
                        f"{exc.error_message}"
                    ) from None
                if status is not None and 400 <= status < 500 and status != 409:
                    raise ConfigError(
                        f"{what}: the schema registry answered HTTP {status}: {exc.error_message}"
                    ) from None
                # a 5xx, or a 409 conflict without incompatibility: two registrations of the same
                # schema at once (Apicurio answers one of them so); tried again
                failure: BaseException = exc
            except self._transport_errors as exc:  # the registry does not answer
                failure = exc
            if attempt < _TRIES:
                time.sleep(pause)
                pause *= 2
        code = getattr(failure, "http_status_code", None)
        why = f"HTTP {code}" if code is not None else type(failure).__name__
        log.warning("the schema registry at %s did not answer %s (%s)", shown(self.url), what, why)
        raise SchemaRegistryUnavailableError(
            f"the schema registry at {shown(self.url)} did not answer {what} after {_TRIES} tries: {why}"
        ) from failure

    # -- writing ---------------------------------------------------------------------------------

    def schema_id(self, topic: str, record: str, version: int = CURRENT_VERSION) -> int:
        """The ID of ``record``'s schema of ``version`` under ``topic``'s subject (looked up, not
        registered: ``SchemaNotRegisteredError`` if absent)."""
        subject = subject_of(topic)
        text = schema_text(record, version)
        found = self._call(
            f"the {record} schema of version {version} under subject {subject!r}",
            lambda: self._client.lookup_schema(subject, self._schema(text, "AVRO")),
        )
        schema_id = int(found.schema_id or 0)
        with self._lock:
            self._canonical.setdefault(schema_id, _canonical(json.loads(text)))
        return schema_id

    def register_topic(self, topic: str, record: str) -> RegisteredSubject:
        """Give ``topic``'s subject the compatibility rule and every version's schema of
        ``record``, oldest first (a version identical to a registered one adds nothing)."""
        subject = subject_of(topic)
        self._call(f"setting {COMPATIBILITY} on {subject!r}", lambda: self._set_compatibility(subject))
        ids: list[int] = []
        for version in _versions_with(record):
            schema_id = self.register_schema(
                topic, schema_text(record, version), f"{record} of schema version {version}"
            )
            if schema_id not in ids:
                ids.append(schema_id)
        return RegisteredSubject(subject, ids)

    def register_schema(self, topic: str, text: str, what: str = "a schema") -> int:
        """Register an Avro schema (its JSON text) under ``topic``'s subject; its ID
        (``IncompatibleSchemaError`` if the subject's rule refuses it)."""
        subject = subject_of(topic)
        return self._call(
            f"registering {what} under {subject!r}",
            lambda: int(self._client.register_schema(subject, self._schema(text, "AVRO"))),
        )

    def _set_compatibility(self, subject: str) -> None:
        from confluent_kafka.schema_registry import ConfigCompatibilityLevel, ServerConfig  # (see __init__)

        level = ConfigCompatibilityLevel(COMPATIBILITY)
        self._client.set_config(subject_name=subject, config=ServerConfig(compatibility=level))

    def compatibility(self, topic: str) -> str:
        subject = subject_of(topic)
        config = self._call(f"the compatibility of {subject!r}", lambda: self._client.get_config(subject))
        level = config.compatibility or config.compatibility_level  # registries name it either way
        return str(level) if level is not None else ""

    # -- reading ---------------------------------------------------------------------------------

    def writer_schema(self, schema_id: int) -> tuple[Any, str]:
        """The parsed schema with this ID, and its canonical form (cached: an ID's schema never
        changes in a registry)."""
        with self._lock:
            parsed = self._writers.get(schema_id)
            if parsed is not None:
                return parsed, self._canonical[schema_id]
        found = self._call(f"schema ID {schema_id}", lambda: self._client.get_schema(schema_id))
        if (found.schema_type or "AVRO") != "AVRO":
            raise SchemaNotRegisteredError(f"schema ID {schema_id} is a {found.schema_type} schema, not Avro")
        raw = json.loads(found.schema_str or "null")
        parsed = fastavro.parse_schema(raw)
        with self._lock:
            self._writers[schema_id] = parsed
            self._canonical.setdefault(schema_id, _canonical(raw))
            return parsed, self._canonical[schema_id]

    def current_canonical(self, record: str) -> str:
        return _current_canonical(record)


def _transport_errors() -> tuple[type[BaseException], ...]:
    """What the registry client raises when the registry does not answer: its HTTP library's
    transport errors (httpx2 on Python 3.10+, httpx before) and timeouts."""
    errors: list[type[BaseException]] = [OSError, TimeoutError]
    for name in ("httpx2", "httpx"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        errors.append(module.TransportError)
    return tuple(errors)


def _canonical(schema: Any) -> str:
    return str(fastavro.schema.to_parsing_canonical_form(fastavro.parse_schema(schema)))


@functools.cache
def _current_canonical(record: str) -> str:
    return _canonical(self_contained(record, load_schema_set(None)))


#: one client per registry URL (a cache: a registry's IDs and schemas are the same for every caller)
_REGISTRIES: dict[str, SchemaRegistry] = {}


def registry(url: str) -> SchemaRegistry:
    """The ``SchemaRegistry`` of ``url``, made on first use."""
    found = _REGISTRIES.get(url)
    if found is None:
        found = _REGISTRIES.setdefault(url, SchemaRegistry(url))
    return found


def register_topics(topics: Catalogue, url: str) -> list[RegisteredSubject]:
    """Register the public topics' subjects of the namespace whose ``Catalogue`` is ``topics``
    (``kadence topics apply``)."""
    found = registry(url)
    return [found.register_topic(getattr(topics, topic), record) for record, topic in PUBLIC_RECORDS.items()]


def only_registry() -> SchemaRegistry | None:
    """The registry this process made, if it made exactly one."""
    found = list(_REGISTRIES.values())
    return found[0] if len(found) == 1 else None
