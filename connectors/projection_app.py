"""The live projection process: a Faust app (one per namespace, app id
``{ns}.projections``) whose agent consumes ``{ns}.history`` and keeps the Redis
projections (visibility and the history read model) up to date.

Delivery is at-least-once into idempotent sinks: the agent takes batches without
acknowledging them (``noack_take``), writes each batch to Redis in one pipeline (one Lua call
per projection, guarded by each run's last seq), and acknowledges the events only after Redis
answered; Faust commits acknowledged offsets (every ``commit_interval_s``). A crash replays at
most the uncommitted tail, which the seq guard ignores. A Redis error is retried (with backoff)
until it succeeds: an unwritten event is never acknowledged.

Two Faust defaults are changed on purpose:
- the consumer reads with ``isolation_level=read_committed`` (Faust only does that in its
  exactly-once mode): the history topic is written in transactions, and an aborted batch must
  never reach a projection;
- the consumer refreshes its topic metadata every ``metadata_max_age_s`` (10 s, not 5 min), so a
  group formed while the metadata lacked the history topic rejoins soon.

The consumer uses dynamic group membership (decision 0038): a restarted instance joins as a new
member and the group rebalances once the old member's session expires. A static member that
came back took over the old member's assignment without a rebalance, including an empty one.

Every ``status_interval_s`` the process computes its lag (per partition: history offsets not
yet applied, and how old the newest applied event is when behind), exports it as Prometheus
gauges and writes it to Redis (``kadence:{ns}:projections:status``) for
``kadence.readmodels.visibility.projection_lag``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types.auth import CredentialsT as Credentials
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kadence.readmodels.keys import PROJECTIONS, ProjectionKeys, status_key
from kadence.topics import settings
from kadence.topics.broker_wait import until_broker_answers
from kadence.topics.catalogue import Catalogue
from kadence.topics.config import KafkaConfig
from kadence.topics.errors import ConfigError, TopicError
from kadence.topics.settings import milliseconds_setting, session_timeout_setting, setting

from .projection_sink import BatchResult, ProjectionSink, RawRecord

__all__ = ["ProjectionConfig", "ProjectionMetrics", "create_app", "run_projections"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ProjectionConfig:
    kafka: KafkaConfig
    redis_url: str = setting(
        "redis://127.0.0.1:6379/0", env="KADENCE_REDIS_URL", help="the Redis the projections are written to"
    )
    instance_id: str = setting(
        env="KADENCE_PROJECTION_ID",
        help="this instance's name (client ID, lag report, Faust's directory); default: the host name",
        default_factory=socket.gethostname,
    )
    batch_max: int = setting(2000, env="KADENCE_PROJECTION_BATCH", help="most events per Redis round trip")
    batch_within_s: float = milliseconds_setting(
        0.02, env="KADENCE_PROJECTION_BATCH_WAIT_MS", help="how long a batch waits to fill"
    )
    commit_interval_s: float = milliseconds_setting(
        1.0, env="KADENCE_PROJECTION_COMMIT_MS", help="offset commit interval"
    )
    session_timeout_s: float = session_timeout_setting(seconds=True)
    #: how often the lag is computed and reported
    status_interval_s: float = 1.0
    #: The group leader assigns only the partitions its metadata names; metadata taken while the
    #: broker restarts can lack the history topic, and then the group holds nothing until the next
    #: refresh makes it rejoin. aiokafka's default, 5 minutes, left the projection that long
    #: behind after a broker restart (``make soak``); a refresh costs one metadata request.
    metadata_max_age_s: float = milliseconds_setting(
        10.0, env="KADENCE_PROJECTION_METADATA_MAX_AGE_MS", help="how stale the consumer's topic metadata may grow"
    )
    #: Faust keeps nothing there that matters (the state is in Redis). By default under the
    #: system's temporary directory; Faust's own default, ``{app id}-data`` in the current
    #: directory, left one per namespace wherever the process was started.
    data_dir: str = setting(
        env="KADENCE_PROJECTION_DATA_DIR",
        help="Faust's working directory; default: kadence-projections under the system's temporary directory",
        default_factory=lambda: os.path.join(tempfile.gettempdir(), "kadence-projections"),
    )

    @property
    def app_id(self) -> str:
        """The Faust app's ID, so also its consumer group and the prefix of the one topic Faust
        creates (``{app id}-__assignor-__leader``): under the namespace's prefix, which one
        prefixed ACL set covers. It was ``kadence-projections-{ns}`` before: an upgraded process reads
        the history again from its start into the idempotent sinks (docs/projections.md)."""
        return f"{self.kafka.namespace}.projections"

    @classmethod
    def from_env(cls, kafka: KafkaConfig, env: Mapping[str, str] | None = None, **overrides: Any) -> ProjectionConfig:
        """The declared settings from the environment (``kadence.topics.settings``); ``overrides`` win."""
        return settings.from_env(cls, env, kafka=kafka, **overrides)


class ProjectionMetrics:
    """The projections' families; every one carries ``namespace``, bound here."""

    def __init__(self, registry: CollectorRegistry, namespace: str) -> None:
        r, ns = registry, ["namespace"]
        lag_events = Gauge(
            "kadence_projection_lag_events", "history offsets not yet applied", ["namespace", "projection"], registry=r
        )
        lag_seconds = Gauge(
            "kadence_projection_lag_seconds",
            "age of the newest applied history event while behind (0 when caught up)",
            ["namespace", "projection"],
            registry=r,
        )
        self.lag_events = {name: lag_events.labels(namespace, name) for name in PROJECTIONS}
        self.lag_seconds = {name: lag_seconds.labels(namespace, name) for name in PROJECTIONS}
        self.applied = Counter(
            "kadence_projection_events_applied_total",
            "history event writes applied (summed over the projections)",
            ns,
            registry=r,
        ).labels(namespace)
        self.duplicates = Counter(
            "kadence_projection_duplicates_total", "redelivered history events ignored by the seq guard", ns, registry=r
        ).labels(namespace)
        self.gaps = Counter(
            "kadence_projection_gaps_total",
            "history events skipped because earlier events of their run are missing (the projection needs a rebuild)",
            ns,
            registry=r,
        ).labels(namespace)
        self.batch_seconds = Histogram(
            "kadence_projection_batch_seconds", "Redis write time per batch", ns, registry=r
        ).labels(namespace)


# -- read_committed for Faust's aiokafka consumer ------------------------------------------------


class _ReadCommittedThread(faust_aiokafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        # aiokafka hands this to its Fetcher in start(); Faust sets read_committed only in its
        # (experimental) exactly-once mode, which we do not want.
        consumer._isolation_level = "read_committed"
        return consumer


class _ReadCommittedConsumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> Any:
        return _ReadCommittedThread(self, loop=self.loop, beacon=self.beacon)


class _Transport(faust_aiokafka.Transport):
    Consumer = _ReadCommittedConsumer


class _App(faust.App):
    def _new_transport(self) -> Any:
        return _Transport(self.conf.broker_consumer, self)


# -- the app ---------------------------------------------------------------------------------------


def faust_credentials(kafka: KafkaConfig) -> Credentials | None:
    """Faust's (aiokafka's) form of the same ``KADENCE_KAFKA_*`` TLS/SASL settings every
    confluent-kafka client of Kafka takes (``KafkaConfig.security``): SASL credentials with
    their mechanism, and a TLS context trusting ``KADENCE_KAFKA_SSL_CA`` (the system's CAs when
    unset) with the client certificate of ``KADENCE_KAFKA_SSL_CERT``/``_KEY`` for mutual TLS.
    None for PLAINTEXT. A file that cannot be loaded is a ``ConfigError``."""
    sec = kafka.security
    protocol = str(sec.get("security.protocol", "PLAINTEXT")).upper()
    if protocol == "PLAINTEXT":
        return None
    context = None
    if protocol.endswith("SSL"):
        try:
            context = ssl.create_default_context(cafile=sec.get("ssl.ca.location"))
            if sec.get("ssl.certificate.location"):
                context.load_cert_chain(
                    sec["ssl.certificate.location"], sec.get("ssl.key.location"), sec.get("ssl.key.password")
                )
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"the projections cannot load the TLS files of KADENCE_KAFKA_SSL_*: {exc}") from exc
    if protocol.startswith("SASL_"):
        return faust.SASLCredentials(
            username=sec["sasl.username"],
            password=sec["sasl.password"],
            ssl_context=context,
            mechanism=str(sec["sasl.mechanism"]).upper(),
        )
    assert context is not None  # SSL
    return faust.SSLCredentials(context)


class _Progress:
    """What the agent applied, per partition, for the lag report."""

    def __init__(self) -> None:
        self.started = time.time()
        self.applied_next: dict[int, int] = {}
        self.applied_ts: dict[int, float] = {}
        self.received_next: dict[int, int] = {}
        self.pending_ts: dict[int, float] = {}


def create_app(config: ProjectionConfig, registry: CollectorRegistry | None = None) -> faust.App:
    """The Faust app of ``config.kafka.namespace`` (not started)."""
    kafka = config.kafka
    credentials = faust_credentials(kafka)
    registry = registry or CollectorRegistry()
    metrics = ProjectionMetrics(registry, kafka.namespace)
    os.makedirs(config.data_dir, exist_ok=True)  # Faust makes only the last level of its own
    app = _faust_app(config, credentials)
    history = Catalogue(kafka).history
    topic = app.topic(history, value_serializer="raw", key_serializer="raw", internal=False)
    progress = _Progress()
    state: dict[str, Any] = {}

    async def redis_client() -> tuple[Any, ProjectionSink]:
        if "redis" not in state:
            import redis.asyncio as aioredis

            state["redis"] = aioredis.from_url(config.redis_url, socket_timeout=10, socket_connect_timeout=5)
            state["sink"] = ProjectionSink(state["redis"], kafka.namespace)
        return state["redis"], state["sink"]

    @app.agent(topic, name="project-history")
    async def project(stream: Any) -> None:
        def seen(value: Any) -> Any:
            ev = stream.current_event
            if ev is not None:
                m = ev.message
                progress.received_next[m.partition] = max(progress.received_next.get(m.partition, 0), m.offset + 1)
                progress.pending_ts.setdefault(m.partition, m.timestamp)
            return value

        stream.add_processor(seen)
        async for events in stream.noack_take(config.batch_max, within=config.batch_within_s):
            records = [
                RawRecord(
                    e.message.partition,
                    e.message.offset,
                    e.message.key,
                    e.message.value,
                    int((e.message.timestamp or 0) * 1000),
                )
                for e in events
            ]
            _, sink = await redis_client()
            _applied(metrics, progress, records, await _apply_until_written(sink, records, metrics))
            for e in events:
                await stream.ack(e)

    @app.timer(config.status_interval_s)
    async def report_lag() -> None:
        try:
            redis, _ = await redis_client()
            report = await _lag_report(app, history, progress, redis, kafka.namespace)
        except Exception as exc:  # noqa: BLE001 - a missed report is retried next interval
            log.debug("lag report failed: %s", exc)
            return
        for name in PROJECTIONS:
            metrics.lag_events[name].set(report["events"])
            metrics.lag_seconds[name].set(report["seconds"])
        try:
            await redis.set(status_key(kafka.namespace), json.dumps(report), ex=3600)
        except Exception as exc:  # noqa: BLE001
            log.debug("lag report not stored: %s", exc)

    app.kadence_metrics = metrics  # type: ignore[attr-defined]  # for tests and the CLI
    return app


async def _lag_report(app: Any, history: str, progress: _Progress, redis: Any, namespace: str) -> dict[str, Any]:
    now = time.time()
    keys = ProjectionKeys(namespace, "visibility")
    gen = (await redis.get(keys.pointer) or b"0").decode()
    stored = {int(k): int(v) for k, v in (await redis.hgetall(f"{keys.prefix(gen)}pos")).items()}
    parts: dict[str, Any] = {}
    total, worst = 0, 0.0
    for tp in app.consumer.assignment():
        if tp.topic != history:
            continue
        p = tp.partition
        hw = app.consumer.highwater(tp)
        if hw is None or hw < 0:
            continue
        position = await app.consumer.position(tp)
        applied = max(progress.applied_next.get(p, 0), stored.get(p, 0))
        received = progress.received_next.get(p, 0)
        if position is not None and position >= hw and received <= applied:
            events, seconds = 0, 0.0
        else:
            events = max(0, hw - applied)
            since = progress.applied_ts.get(p) or progress.pending_ts.get(p) or progress.started
            seconds = max(0.0, now - since) if events else 0.0
        parts[p] = {"applied": applied, "high": hw, "events": events, "seconds": round(seconds, 3)}
        total += events
        worst = max(worst, seconds)
    return {"updated_ms": int(now * 1000), "events": total, "seconds": round(worst, 3), "partitions": parts}


def wait_for_broker(kafka: KafkaConfig, *, who: str, stop: threading.Event | None = None) -> None:
    """Return once the broker answers a metadata request (retried with backoff, a warning each
    time); with ``stop`` set, raise ``BrokerUnavailableError`` instead of waiting further."""
    catalogue = Catalogue(kafka)
    admin = catalogue.admin()

    def ask() -> None:
        # a refused login or a missing ACL ends the wait with its typed error (the process exits 1)
        if catalogue.history not in catalogue.existing(admin, timeout=5):
            try:
                catalogue.require([catalogue.history], admin, timeout=5)
            except TopicError:  # not created yet: the consumer's metadata refresh finds it later
                pass

    until_broker_answers(ask, what="starting", who=who, stop=stop or threading.Event(), log=log)


def run_projections(
    config: ProjectionConfig,
    registry: CollectorRegistry | None = None,
    loglevel: str = "info",
    on_started: Callable[[], None] | None = None,
) -> None:
    """Run the projection app until SIGTERM/SIGINT (blocking). Started while the broker is down
    (a supervisor restarting it during an outage), it waits for the broker first: Faust's
    consumer gives up at once when it cannot bootstrap (``KafkaConnectionError``), which a
    ``make chaos`` seed showed as seven projection exits in a row during one broker restart."""
    wait_for_broker(config.kafka, who=f"projections {config.instance_id}")
    app = create_app(config, registry)
    if on_started is not None:  # e.g. readiness: Faust runs an app's tasks once the app has started

        @app.task
        async def started() -> None:
            on_started()

    worker = faust.Worker(app, loglevel=loglevel, quiet=True, override_logging=False)
    log.info(
        "projections of namespace %s: app %s, instance %s", config.kafka.namespace, config.app_id, config.instance_id
    )
    worker.execute_from_commandline()


def _faust_app(config: ProjectionConfig, credentials: Credentials | None) -> faust.App:
    """The Faust app of the projections, configured from ``config`` (not started)."""
    kafka = config.kafka
    return _App(
        config.app_id,
        broker=[f"kafka://{h.strip()}" for h in kafka.bootstrap.split(",")],
        value_serializer="raw",
        key_serializer="raw",
        store="memory://",
        web_enabled=False,
        autodiscover=False,
        topic_replication_factor=kafka.replication,
        topic_partitions=kafka.partitions,
        consumer_auto_offset_reset="earliest",
        broker_commit_interval=config.commit_interval_s,
        broker_session_timeout=config.session_timeout_s,
        broker_heartbeat_interval=max(0.5, config.session_timeout_s / 10),
        broker_client_id=f"{config.app_id}.{config.instance_id}",
        broker_credentials=credentials,
        consumer_metadata_max_age_ms=int(config.metadata_max_age_s * 1000),
        datadir=os.path.join(config.data_dir, f"{config.app_id}-{config.instance_id}"),
    )


async def _apply_until_written(
    sink: ProjectionSink, records: list[RawRecord], metrics: ProjectionMetrics
) -> BatchResult:
    """Apply a batch to Redis, retried (with backoff up to 5 s) until it is written: a batch is
    never acknowledged unwritten."""
    delay = 0.1
    while True:
        t0 = time.perf_counter()
        try:
            result = await sink.apply(records)
            break
        except (OSError, ConnectionError, TimeoutError) as exc:
            log.warning("projection write failed (%s: %s); retrying in %.1fs", type(exc).__name__, exc, delay)
        except Exception as exc:  # noqa: BLE001 - redis errors: never ack an unwritten batch
            log.warning("projection write failed (%s: %s); retrying in %.1fs", type(exc).__name__, exc, delay)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 5.0)
    metrics.batch_seconds.observe(time.perf_counter() - t0)
    return result


def _applied(metrics: ProjectionMetrics, progress: _Progress, records: list[RawRecord], result: BatchResult) -> None:
    """Count a written batch (applied, duplicates, gaps) and advance the lag report's progress."""
    metrics.applied.inc(result.applied)
    metrics.duplicates.inc(result.duplicates)
    if result.gaps:
        metrics.gaps.inc(result.gaps)
        parts = sorted({r.partition for r in records})
        log.warning(
            "%d history events skipped on partitions %s: earlier events of their runs are "
            "missing from the projection (rebuild it: kadence projections rebuild)",
            result.gaps,
            parts,
        )
    for r in records:
        progress.applied_next[r.partition] = max(progress.applied_next.get(r.partition, 0), r.offset + 1)
        progress.applied_ts[r.partition] = max(progress.applied_ts.get(r.partition, 0.0), r.timestamp_ms / 1000)
        progress.pending_ts.pop(r.partition, None)
