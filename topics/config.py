"""Kafka connection and namespace configuration, as frozen dataclasses passed explicitly.

Each setting names its environment variable and default beside it. ``from_env()`` reads them;
nothing reads the environment behind the caller's back.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import settings
from .errors import ConfigError
from .kafka_access import ClientErrors
from .settings import setting

__all__ = [
    "LOG_FORMATS",
    "NAMESPACE_RE",
    "PAUSING_FETCH_WAIT_MS",
    "SECURITY_PROTOCOLS",
    "SECURITY_VARIABLES",
    "KafkaConfig",
]

NAMESPACE_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
#: what KADENCE_LOG_FORMAT / ``--log-format`` may be
LOG_FORMATS = ("text", "json")

#: ``fetch.wait.max.ms`` of a consumer that pauses and resumes partitions as it goes (the history
#: processor's commands, the timer service's tiers), whatever ``KADENCE_FETCH_WAIT_MS`` says: a
#: fetch that left without a partition paused at that moment holds the partition's next fetch
#: back for its whole wait after the resume (librdkafka sends one fetch per broker at a time).
#: Measured with 500 ms in the processor: start -> result p99 565 ms at one workflow at a time
#: (docs/performance.md, "Session 22").
PAUSING_FETCH_WAIT_MS = 20

#: the TLS/SASL variables ``from_env`` gathers into ``KafkaConfig.security``, with librdkafka's
#: names; the Faust projections take the same ones (``kadence.connectors.projection_app``)
SECURITY_VARIABLES = {
    "KADENCE_KAFKA_SECURITY_PROTOCOL": "security.protocol",
    "KADENCE_KAFKA_SASL_MECHANISM": "sasl.mechanism",
    "KADENCE_KAFKA_SASL_USERNAME": "sasl.username",
    "KADENCE_KAFKA_SASL_PASSWORD": "sasl.password",
    "KADENCE_KAFKA_SSL_CA": "ssl.ca.location",
    "KADENCE_KAFKA_SSL_CERT": "ssl.certificate.location",
    "KADENCE_KAFKA_SSL_KEY": "ssl.key.location",
    "KADENCE_KAFKA_SSL_KEY_PASSWORD": "ssl.key.password",
}
#: what ``security.protocol`` may be
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, kw_only=True)
class KafkaConfig:
    bootstrap: str = setting(
        "127.0.0.1:9092",
        env="KADENCE_KAFKA_BOOTSTRAP",
        help="Kafka bootstrap servers, host:port[,host:port]",
        keep_empty=True,
    )
    namespace: str = setting(
        "kadence", env="KADENCE_NAMESPACE", help="topic name prefix; tenants are isolated by namespace", keep_empty=True
    )
    partitions: int = setting(
        4,
        env="KADENCE_PARTITIONS",
        help="partitions of commands/history/state, fixed when the namespace is created",
        keep_empty=True,
    )
    replication: int = setting(
        1, env="KADENCE_REPLICATION", help="replication factor of created topics", keep_empty=True
    )
    #: ``min.insync.replicas`` of every topic Kadence creates: how many replicas must have a
    #: write before it is acknowledged (with ``acks=all``, which the engine's producers use).
    #: 0 (default): 2 when the replication factor is 3 or more, else 1
    min_insync_replicas: int = setting(
        0,
        env="KADENCE_MIN_INSYNC_REPLICAS",
        help="min.insync.replicas of created topics (0: 2 at replication 3 or more, else 1)",
    )
    #: KADENCE_KAFKA_SECURITY_PROTOCOL / _SASL_MECHANISM / _SASL_USERNAME / _SASL_PASSWORD /
    #: _SSL_CA / _SSL_CERT / _SSL_KEY / _SSL_KEY_PASSWORD (``from_env`` gathers them into
    #: librdkafka's names, ``SECURITY_VARIABLES``)
    security: dict[str, Any] = field(default_factory=dict)
    client_id: str = setting(
        env="KADENCE_CLIENT_ID",
        help="identity of this process in broker logs and history (default: host name and process ID)",
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}",
    )
    #: how long clients, workers and the gateway hold a command to batch it with the next ones
    #: (librdkafka ``linger.ms``). 0 (default): sent at once, lowest step latency. 2: a third more
    #: workflows per second on a saturated machine, ~5 ms more per step at light load
    #: (docs/performance.md, "Client linger")
    client_linger_ms: float = setting(
        0.0,
        env="KADENCE_CLIENT_LINGER_MS",
        help="ms clients, workers and the gateway hold a command to batch it (librdkafka linger.ms)",
    )
    #: ``linger.ms`` of the engine's transactional producers (history processor, activity
    #: reporter). Their transactions are flushed at commit anyway, so a linger only delays the
    #: first records of each one (docs/performance.md, "Session 22")
    txn_linger_ms: float = setting(
        0.0, env="KADENCE_TXN_LINGER_MS", help="linger.ms of the engine's transactional producers"
    )
    #: how long the broker holds the fetch of a consumer that waits for new records
    #: (``waiting_consumer``: workers' task consumers, clients' reply consumers, the processor's
    #: build defaults) when it has nothing new (librdkafka ``fetch.wait.max.ms``). A fetch
    #: returns as soon as a record is there, so this bounds nothing a waiting caller sees; it sets
    #: how often an idle consumer asks again, which is the broker's CPU at idle
    #: (docs/performance.md, "Session 22")
    fetch_wait_ms: int = setting(
        500, env="KADENCE_FETCH_WAIT_MS", help="ms the broker holds an idle waiting consumer's fetch"
    )
    #: librdkafka debug contexts for every client of this process (for example
    #: ``metadata,topic,eos``); empty (default): none. For diagnosis only: it is verbose
    kafka_debug: str = setting("", env="KADENCE_KAFKA_DEBUG", help="librdkafka debug contexts, for diagnosis")
    #: a transactional producer (processor, activity reporter) closes a connection idle this long
    #: (librdkafka ``connections.max.idle.ms``; 0: never). Not for the sockets' sake: the close is
    #: a broker state change, the only thing that makes librdkafka 2.16 look for the group
    #: coordinator again when ``send_offsets_to_transaction`` waits on one it dropped after a
    #: broker restart (librdkafka #5511; it waited for minutes, whatever its timeout, #5456). A
    #: help, not the fix (decision 0035): the call returned 3-4 s after it began in a debug run, but
    #: not when another request kept the client busy; the processor and reporter also give the
    #: call up (``GuardedCall``). Default 3000 ms.
    txn_idle_reconnect_ms: int = setting(
        3000,
        env="KADENCE_TXN_IDLE_RECONNECT_MS",
        help="ms after which a transactional producer closes an idle connection (0: never)",
    )
    #: ``text`` (default) or ``json`` (one JSON object per line with the workflow's fields,
    #: ``kadence.topics.log_context``). With ``json`` librdkafka's own lines go through Python
    #: logging too (logger ``kadence.librdkafka``), so that every line is JSON; they are then
    #: delivered when the client is polled, not at once as on stderr
    log_format: str = setting("text", env="KADENCE_LOG_FORMAT", help="log line format: text or json")
    #: a schema registry with Confluent's API (``http(s)://[user:password@]host:port/path``): the
    #: records written to the public topics (commands, replies, history) are then in the Confluent
    #: wire format with its schema IDs, and ``kadence topics apply`` registers the subjects; empty
    #: (default): Kadence's own format, no registry (decision 0056, docs/schema-registry.md). Not
    #: shown in the config's repr (it may hold a password)
    schema_registry_url: str = setting(
        "",
        env="KADENCE_SCHEMA_REGISTRY_URL",
        help="schema registry URL: public topics in the Confluent wire format (empty: Kadence's format)",
        repr=False,
    )

    def __post_init__(self) -> None:
        self._check_security()
        if self.replication < 1:
            raise ConfigError(f"replication must be >= 1, not {self.replication}")
        if not 0 <= self.min_insync_replicas <= self.replication:
            raise ConfigError(
                f"min_insync_replicas must be 0 (automatic) or between 1 and the replication factor "
                f"{self.replication}, not {self.min_insync_replicas}"
            )
        if not NAMESPACE_RE.match(self.namespace):
            raise ConfigError(f"namespace {self.namespace!r} must match {NAMESPACE_RE.pattern}")
        if not self.bootstrap:
            raise ConfigError("Kafka bootstrap servers are empty (set KADENCE_KAFKA_BOOTSTRAP)")
        if self.partitions < 1:
            raise ConfigError("partitions must be >= 1")
        if not 0 <= self.client_linger_ms <= 1000:
            raise ConfigError(f"client_linger_ms must be between 0 and 1000, not {self.client_linger_ms}")
        if not 0 <= self.txn_linger_ms <= 1000:
            raise ConfigError(f"txn_linger_ms must be between 0 and 1000, not {self.txn_linger_ms}")
        if not 1 <= self.fetch_wait_ms <= 10_000:
            raise ConfigError(f"fetch_wait_ms must be between 1 and 10000, not {self.fetch_wait_ms}")
        if self.schema_registry_url and not re.match(r"^https?://[^/\s]+", self.schema_registry_url):
            raise ConfigError("schema_registry_url (KADENCE_SCHEMA_REGISTRY_URL) must be an http:// or https:// URL")
        if self.log_format not in LOG_FORMATS:
            raise ConfigError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {self.log_format!r}")
        if self.txn_idle_reconnect_ms != 0 and not 1000 <= self.txn_idle_reconnect_ms <= 3_600_000:
            raise ConfigError(
                f"txn_idle_reconnect_ms must be 0 (never) or between 1000 and 3600000, not {self.txn_idle_reconnect_ms}"
            )

    def _check_security(self) -> None:
        """A TLS/SASL setting that cannot work is refused here, before any client tries it."""
        sec = self.security
        protocol = str(sec.get("security.protocol", "PLAINTEXT")).upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"KADENCE_KAFKA_SECURITY_PROTOCOL must be one of {', '.join(SECURITY_PROTOCOLS)}, not {protocol!r}"
            )
        sasl = protocol.startswith("SASL_")
        mechanism = str(sec.get("sasl.mechanism", "")).upper()
        if sasl and mechanism not in _SASL_MECHANISMS:
            raise ConfigError(
                f"KADENCE_KAFKA_SASL_MECHANISM must be one of {', '.join(_SASL_MECHANISMS)} with {protocol}, "
                f"not {mechanism or 'unset'!r}"
            )
        if sasl and not (sec.get("sasl.username") and sec.get("sasl.password")):
            raise ConfigError(f"{protocol} needs KADENCE_KAFKA_SASL_USERNAME and KADENCE_KAFKA_SASL_PASSWORD")
        if not sasl and any(k.startswith("sasl.") for k in sec):
            raise ConfigError(
                f"SASL settings are given but KADENCE_KAFKA_SECURITY_PROTOCOL is {protocol}: "
                "set it to SASL_SSL (or SASL_PLAINTEXT)"
            )
        if ("ssl.certificate.location" in sec) != ("ssl.key.location" in sec):
            raise ConfigError("a client certificate needs both KADENCE_KAFKA_SSL_CERT and KADENCE_KAFKA_SSL_KEY")
        for key, var in (
            ("ssl.ca.location", "KADENCE_KAFKA_SSL_CA"),
            ("ssl.certificate.location", "KADENCE_KAFKA_SSL_CERT"),
            ("ssl.key.location", "KADENCE_KAFKA_SSL_KEY"),
        ):
            if key in sec and not os.path.isfile(sec[key]):
                raise ConfigError(f"{var}={sec[key]!r}: no such file")
            if key in sec and not protocol.endswith("SSL"):
                raise ConfigError(f"{var} is given but KADENCE_KAFKA_SECURITY_PROTOCOL is {protocol}, without TLS")

    @property
    def topic_min_insync_replicas(self) -> int:
        """``min.insync.replicas`` for the topics this namespace creates."""
        if self.min_insync_replicas:
            return self.min_insync_replicas
        return 2 if self.replication >= 3 else 1

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> KafkaConfig:
        """The declared settings from the environment (``kadence.topics.settings``), the TLS/SASL
        variables gathered into ``security``; ``overrides`` win."""
        env = os.environ if env is None else env
        kw: dict[str, Any] = {}
        sec = {key: env[var] for var, key in SECURITY_VARIABLES.items() if env.get(var)}
        if sec:
            kw["security"] = sec
        kw.update(overrides)
        return settings.from_env(cls, env, **kw)

    # -- librdkafka configurations -------------------------------------------------------------

    def base(self) -> dict[str, Any]:
        conf = {
            "bootstrap.servers": self.bootstrap,
            "client.id": self.client_id,
            # librdkafka doubles the wait between connection attempts up to 10 s: after a
            # 12 s broker restart its clients came back up to 10 s after the broker did
            # (decision 0035). 1 s is the Java client's default.
            "reconnect.backoff.max.ms": 1000,
            **self.security,
            # a refused login or TLS handshake as a typed error instead of an outage, and each
            # kind of client error logged once a minute (kadence.topics.kafka_access)
            "error_cb": ClientErrors(who=self.client_id, bootstrap=self.bootstrap, security=self.security),
        }
        if self.kafka_debug:
            conf["debug"] = self.kafka_debug
        if self.log_format == "json":
            conf["logger"] = logging.getLogger("kadence.librdkafka")
        return conf

    def producer(self, **extra: Any) -> dict[str, Any]:
        # murmur2_random: the Java client's default partitioner, so that any Kafka client that
        # keys a record by workflow ID lands on the workflow's shard.
        return {
            **self.base(),
            "partitioner": "murmur2_random",
            "enable.idempotence": True,
            "linger.ms": 1,
            "compression.type": "lz4",
            **extra,
        }

    def transactional_producer(self, transactional_id: str, **extra: Any) -> dict[str, Any]:
        """A producer configuration for ``transactional.id`` (an engine write path that commits
        consumed offsets with ``send_offsets_to_transaction``)."""
        conf = self.producer(**{"transactional.id": transactional_id, "linger.ms": self.txn_linger_ms, **extra})
        if self.txn_idle_reconnect_ms:
            conf["connections.max.idle.ms"] = self.txn_idle_reconnect_ms
        return conf

    def waiting_consumer(self, group: str | None, **extra: Any) -> dict[str, Any]:
        """``consumer`` for a long-lived consumer that waits for new records, idle most of the
        time at light load: its fetches wait ``fetch_wait_ms`` in the broker. Not for a reader
        that reads to an end it learns from an empty fetch (that fetch would wait as long), nor
        for one that pauses partitions as it goes (``PAUSING_FETCH_WAIT_MS``)."""
        return self.consumer(group, **{"fetch.wait.max.ms": self.fetch_wait_ms, **extra})

    def consumer(self, group: str | None, **extra: Any) -> dict[str, Any]:
        conf = {
            **self.base(),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 50,
            "enable.partition.eof": False,
            **extra,
        }
        # under the namespace's prefix, like every group Kadence uses, so that one prefixed ACL
        # covers it (a consumer with a group ID looks up its coordinator even when it only assigns)
        conf["group.id"] = group or f"{self.namespace}.nogroup.{self.client_id}"
        return conf
