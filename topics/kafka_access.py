"""Telling a refusal from an outage.

librdkafka reports a wrong password, an untrusted certificate and a missing ACL in ways that look
like a broker that does not answer: a metadata request times out while every connection fails
its SASL or TLS handshake (the reason goes to the client's error callback, not to the caller),
and a listing of topics simply leaves out the topics the principal may not describe. Without
help, every component then says "waiting for the broker" or "topics missing: run kadence topics
apply", and following that advice fails again.

``ClientErrors`` is the ``error_cb`` every client of ``KafkaConfig.base()`` gets: it remembers
the last authentication or TLS failure, so that a caller whose request failed raises
``KafkaAuthenticationError`` instead of ``BrokerUnavailableError`` (``refusal_of``), and it logs
each kind of client error at most once a minute (librdkafka's own log lines, without an error
callback, repeated the same failure about fifteen times a second). ``authorization_error`` words
a broker's ``*_AUTHORIZATION_FAILED`` answer as the ACL to grant.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from .errors import KafkaAuthenticationError, KafkaAuthorizationError

__all__ = [
    "LOG_EVERY_S",
    "REFUSAL_MEMORY_S",
    "ClientErrors",
    "authorization_error",
    "describe_principal",
    "metadata",
    "refusal_of",
]

log = logging.getLogger("kadence.kafka")

#: each kind (error code) of a client's errors is logged at most once in this many seconds
LOG_EVERY_S = 60.0
#: an authentication or TLS failure older than this no longer explains a failed request
REFUSAL_MEMORY_S = 120.0

#: librdkafka's codes for "the broker would not let this client in"
_AUTHENTICATION = {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED}
_TLS = {KafkaError._SSL}

#: a broker's authorization failures -> (what was refused, the ACL that allows it)
_AUTHORIZATION = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: ("topic", "DESCRIBE, READ and WRITE on topics with the prefix '{ns}.'"),
    KafkaError.GROUP_AUTHORIZATION_FAILED: ("consumer group", "READ (and DESCRIBE) on groups with the prefix '{ns}.'"),
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: (
        "transactional ID",
        "WRITE and DESCRIBE on transactional IDs with the prefix '{ns}.'",
    ),
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: ("cluster", "IDEMPOTENT_WRITE on the cluster"),
}


def describe_principal(security: Mapping[str, Any]) -> str:
    """Who a client connects as, for messages: ``user 'x'`` (SASL), ``a TLS client certificate``
    or ``an anonymous client``; never a secret."""
    user = security.get("sasl.username")
    if user:
        return f"user {user!r}"
    if security.get("ssl.certificate.location") or security.get("ssl.certificate.pem"):
        return "a TLS client certificate"
    return "an anonymous client"


class ClientErrors:
    """A librdkafka ``error_cb``: remembers the last authentication or TLS failure and logs each
    error code at most once every ``every_s`` seconds (with how many were left out). Called from
    whichever thread polls the client; thread-safe."""

    def __init__(
        self,
        *,
        who: str,
        bootstrap: str,
        security: Mapping[str, Any],
        every_s: float = LOG_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        logger: logging.Logger = log,
    ) -> None:
        self.who, self.bootstrap = who, bootstrap
        self.principal = describe_principal(security)
        self.every_s, self.clock, self.log = every_s, clock, logger
        self._lock = threading.Lock()
        self._last_logged: dict[int, float] = {}
        self._left_out: dict[int, int] = {}
        self._refused: tuple[float, KafkaAuthenticationError] | None = None

    def __call__(self, err: KafkaError) -> None:
        code, now = err.code(), self.clock()
        refused = self._refusal_for(err)
        with self._lock:
            if refused is not None:
                self._refused = (now, refused)
            last = self._last_logged.get(code)
            if last is not None and now - last < self.every_s and not err.fatal():
                self._left_out[code] = self._left_out.get(code, 0) + 1
                return
            self._last_logged[code] = now
            left_out = self._left_out.pop(code, 0)
        more = f" ({left_out} more like it in the last {self.every_s:.0f} s)" if left_out else ""
        if refused is not None:
            self.log.error("%s: %s%s", self.who, refused, more)
        else:
            self.log.warning("%s: Kafka client error %s: %s%s", self.who, err.name(), err.str(), more)

    def _refusal_for(self, err: KafkaError) -> KafkaAuthenticationError | None:
        code = err.code()
        if code in _AUTHENTICATION:
            return KafkaAuthenticationError(
                f"the brokers at {self.bootstrap} refused to authenticate {self.principal} ({err.str()}); "
                "check KADENCE_KAFKA_SASL_USERNAME, KADENCE_KAFKA_SASL_PASSWORD and KADENCE_KAFKA_SASL_MECHANISM"
            )
        if code == KafkaError._TRANSPORT and "SSL routines" in err.str() and " alert " in err.str():
            # the broker ended the handshake with a TLS alert: it refused this client's certificate
            # (none sent, expired, or signed by a CA it does not trust); librdkafka files it under
            # transport errors, like a broker that is down
            return KafkaAuthenticationError(
                f"the brokers at {self.bootstrap} refused this client's TLS certificate ({err.str()}); mutual TLS "
                "needs KADENCE_KAFKA_SSL_CERT and KADENCE_KAFKA_SSL_KEY, a certificate that has not expired, "
                "signed by a CA the brokers trust"
            )
        if code in _TLS:
            return KafkaAuthenticationError(
                f"the TLS handshake with the brokers at {self.bootstrap} failed ({err.str()}); check "
                "KADENCE_KAFKA_SSL_CA (the CA that signed the brokers' certificates) and, for mutual TLS, "
                "KADENCE_KAFKA_SSL_CERT and KADENCE_KAFKA_SSL_KEY (signed by a CA the brokers trust, not expired)"
            )
        return None

    def refusal(self, within_s: float = REFUSAL_MEMORY_S) -> KafkaAuthenticationError | None:
        """The last authentication or TLS failure, if one came in the last ``within_s`` seconds."""
        with self._lock:
            if self._refused is None or self.clock() - self._refused[0] > within_s:
                return None
            return self._refused[1]


def refusal_of(conf: Mapping[str, Any], client: Any = None) -> KafkaAuthenticationError | None:
    """The authentication or TLS failure a client built from ``conf`` has seen, if any: why its
    request failed, rather than an outage. ``client`` (a producer, consumer or admin client
    built from ``conf``) is polled first, so that errors still queued reach the callback."""
    if client is not None:
        try:
            client.poll(0)
        except Exception:  # noqa: BLE001 - a closed or failing client: whatever reached the callback is used
            pass
    errors = conf.get("error_cb")
    return errors.refusal() if isinstance(errors, ClientErrors) else None


def metadata(
    client: Any, conf: Mapping[str, Any], *, timeout: float, topic: str | None = None, step_s: float = 1.0
) -> Any:
    """``client.list_topics(topic, timeout)``, asked in steps (``step_s`` first, each step twice
    as long as the one before, so that a slow answer from a starved broker still gets its time)
    so that a refused login or TLS handshake raises its ``KafkaAuthenticationError`` within about
    the first step, not after the whole ``timeout`` (librdkafka keeps retrying the connection
    until then). The last step's ``KafkaException`` otherwise; ``conf`` is the one ``client``
    was built from."""
    deadline = time.monotonic() + timeout
    while True:
        asked = time.monotonic()
        step = max(0.05, min(step_s, deadline - asked))
        try:
            return client.list_topics(timeout=step) if topic is None else client.list_topics(topic=topic, timeout=step)
        except KafkaException as exc:
            refused = refusal_of(conf, client)
            if refused is not None:
                raise refused from exc
            now = time.monotonic()
            if now >= deadline or now - asked < 0.9 * step:  # out of time, or an answer (not a timeout)
                raise
            step_s *= 2


def authorization_error(
    err: KafkaError, *, resource: str, namespace: str, security: Mapping[str, Any]
) -> KafkaAuthorizationError | None:
    """``KafkaAuthorizationError`` naming the principal, ``resource`` and the ACL to grant when
    ``err`` is a broker's authorization failure; None for any other error."""
    kind = _AUTHORIZATION.get(err.code())
    if kind is None:
        return None
    what, grant = kind
    return KafkaAuthorizationError(
        f"{describe_principal(security)} is not authorized for {what} {resource} ({err.str()}); "
        f"grant it {grant.format(ns=namespace)} (docs/deploy.md, 'ACLs')"
    )
