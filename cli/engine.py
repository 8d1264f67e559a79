"""``kadence processor``, ``gateway``, ``worker`` and ``timers``: the engine's long-running
services, each until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import math
import signal
import sys
from collections.abc import Callable
from typing import Any

import click

from kadence.processors.processor_config import ProcessorConfig
from kadence.processors.timer_config import TimerConfig
from kadence.topics import KadenceError, KafkaConfig
from kadence.topics.settings import click_options, given_options

from .codec import current_codec
from .collector import tune_collector_from_env
from .definitions import load_definitions
from .health import metrics_host_option

__all__ = ["gateway", "processor", "timers", "worker"]


@click.command()
@click_options(ProcessorConfig)
@click.option(
    "--metrics-port",
    type=int,
    envvar="KADENCE_PROCESSOR_METRICS_PORT",
    default=None,
    help="serve /metrics, /healthz and /readyz on this port [env KADENCE_PROCESSOR_METRICS_PORT]",
)
@metrics_host_option
@click.pass_obj
def processor(config: KafkaConfig, /, metrics_port: int | None, metrics_host: str, **options: Any) -> None:
    """Run a history processor instance (until SIGTERM/SIGINT). Every option can also be set by
    the environment variable its help names; an option given here wins."""
    from kadence.processors import HistoryProcessor

    try:
        settings = ProcessorConfig.from_env(config, **given_options(ProcessorConfig, options))
    except KadenceError as exc:  # a setting that does not parse or is out of range
        raise click.UsageError(str(exc)) from exc
    _serve(lambda registry: HistoryProcessor(settings, registry=registry), metrics_port, metrics_host, config)


def _serve(make: Callable[[Any], Any], metrics_port: int | None, metrics_host: str, config: KafkaConfig) -> None:
    """Run a blocking engine service (``run()``/``stop()``) until SIGTERM/SIGINT, with
    ``/metrics``, ``/healthz`` and ``/readyz`` on ``metrics_host:metrics_port`` when given
    (``kadence.cli.health``); a typed error exits 1."""
    from prometheus_client import CollectorRegistry

    from .health import serve_health

    registry = CollectorRegistry()
    faulthandler.enable(all_threads=True)  # a crash in librdkafka (SIGSEGV, SIGABRT) prints every thread's stack
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 <pid>`: every thread's stack to stderr
    tune_collector_from_env()
    try:
        service = make(registry)  # (a schema registry that does not answer stops it here)
        if metrics_port is not None:
            serve_health(config, metrics_port, metrics_host, registry, lambda: service.started)
        signal.signal(signal.SIGTERM, lambda *_: service.stop())
        signal.signal(signal.SIGINT, lambda *_: service.stop())
        service.run()
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, envvar="KADENCE_GATEWAY_HOST")
@click.option("--port", default=8080, show_default=True, type=int, envvar="KADENCE_GATEWAY_PORT")
@click.option("--no-auth", is_flag=True, help="accept requests without an API key (development only)")
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False),
    envvar="KADENCE_GATEWAY_TLS_CERT",
    default=None,
    help="serve HTTPS with this certificate (PEM) [env KADENCE_GATEWAY_TLS_CERT]",
)
@click.option(
    "--tls-key",
    type=click.Path(exists=True, dir_okay=False),
    envvar="KADENCE_GATEWAY_TLS_KEY",
    default=None,
    help="the certificate's private key (PEM) [env KADENCE_GATEWAY_TLS_KEY]",
)
@click.option(
    "--tls-client-ca",
    type=click.Path(exists=True, dir_okay=False),
    envvar="KADENCE_GATEWAY_TLS_CLIENT_CA",
    default=None,
    help="require a client certificate signed by this CA (PEM): mutual TLS [env KADENCE_GATEWAY_TLS_CLIENT_CA]",
)
@click.pass_obj
def gateway(
    config: KafkaConfig,
    host: str,
    port: int,
    no_auth: bool,
    tls_cert: str | None,
    tls_key: str | None,
    tls_client_ca: str | None,
) -> None:
    """Serve the HTTP gateway (API keys from `kadence keys`; see docs/gateway.md)."""
    import ssl

    import uvicorn

    from kadence.gateway import GatewayConfig, create_app

    if bool(tls_cert) != bool(tls_key):
        raise click.UsageError("--tls-cert and --tls-key go together")
    if tls_client_ca and not tls_cert:
        raise click.UsageError("--tls-client-ca needs --tls-cert and --tls-key (client certificates need HTTPS)")
    # mutual TLS: uvicorn asks for and checks a client certificate against that CA
    cert_reqs = ssl.CERT_REQUIRED if tls_client_ca else ssl.CERT_NONE
    try:
        overrides: dict[str, Any] = {"auth": False} if no_auth else {}
        app = create_app(GatewayConfig.from_env(config, **overrides))
    except KadenceError as exc:
        raise click.UsageError(str(exc)) from exc
    # what was built so far (FastAPI, pydantic, the routes: most of the process's objects) lives
    # as long as the process: out of the collector's full passes, which otherwise walked it all
    # and were the console's slowest pages (p95 of a 5,000-event workflow page 142-160 ms -> 79-109
    # ms, bench console, docs/performance.md)
    gc.collect()
    gc.freeze()
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="warning",
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
        ssl_ca_certs=tls_client_ca,
        ssl_cert_reqs=cert_reqs,
    )


@click.command()
@click.option("--task-queue", required=True)
@click.option(
    "--module",
    "module_name",
    required=True,
    help="module with WORKFLOWS and ACTIVITIES lists, e.g. kadence.samples.order_fulfilment",
)
@click.option(
    "--build-id",
    default=None,
    envvar="KADENCE_BUILD_ID",
    help="the build of this code: run only workflows pinned to it [env KADENCE_BUILD_ID]",
)
@click.option("--promote", is_flag=True, help="with --build-id: new workflows of the queue start on this build")
@click.option(
    "--max-concurrent-activities",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    envvar="KADENCE_WORKER_MAX_ACTIVITIES",
    help="activities run at once; more wait in the worker [env KADENCE_WORKER_MAX_ACTIVITIES]",
)
@click.option(
    "--eager-workflow-tasks/--no-eager-workflow-tasks",
    default=True,
    show_default=True,
    envvar="KADENCE_WORKER_EAGER",
    help="run a workflow's next task right after its activity completes and send both at once "
    "[env KADENCE_WORKER_EAGER]",
)
@click.option(
    "--eager-activities/--no-eager-activities",
    default=True,
    show_default=True,
    envvar="KADENCE_WORKER_EAGER_ACTIVITIES",
    help="run an activity this worker's workflow task schedules as soon as the engine records it, "
    "handed over in the engine's reply instead of the task topic [env KADENCE_WORKER_EAGER_ACTIVITIES]",
)
@click.option(
    "--transactional-activity-results/--no-transactional-activity-results",
    default=True,
    show_default=True,
    envvar="KADENCE_WORKER_TXN_RESULTS",
    help="commit each batch of activity results with its tasks' offsets in one transaction, so a "
    "crash runs again only activities that had not reported [env KADENCE_WORKER_TXN_RESULTS]",
)
@click.option(
    "--graceful-shutdown-timeout",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    envvar="KADENCE_WORKER_GRACEFUL_SHUTDOWN_S",
    help="seconds the activities running at SIGTERM get to end after they are cancelled "
    "[env KADENCE_WORKER_GRACEFUL_SHUTDOWN_S]",
)
@click.option(
    "--metrics-port",
    type=int,
    envvar="KADENCE_WORKER_METRICS_PORT",
    default=None,
    help="serve /metrics, /healthz and /readyz on this port [env KADENCE_WORKER_METRICS_PORT]",
)
@metrics_host_option
@click.pass_obj
def worker(
    config: KafkaConfig,
    task_queue: str,
    module_name: str,
    build_id: str | None,
    promote: bool,
    max_concurrent_activities: int,
    eager_workflow_tasks: bool,
    eager_activities: bool,
    transactional_activity_results: bool,
    graceful_shutdown_timeout: float,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Run a worker for a task queue (until SIGTERM/SIGINT)."""
    from prometheus_client import CollectorRegistry

    from kadence import Client, Worker

    from .health import serve_health

    workflows, activities = load_definitions(module_name)
    codec = current_codec()
    tune_collector_from_env()

    faulthandler.enable(all_threads=True)  # a crash in librdkafka (SIGSEGV, SIGABRT) prints every thread's stack
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 <pid>`: every thread's stack to stderr
    registry = CollectorRegistry()
    serving: list[Any] = []  # the worker, once it exists (readiness asks it)
    if metrics_port is not None:
        serve_health(config, metrics_port, metrics_host, registry, lambda: bool(serving) and serving[0].started)

    async def run() -> None:
        # a worker may start before the broker (a reboot, a deploy): it waits, it does not exit
        client = await Client.connect(config=config, wait_for_broker=math.inf, codec=codec)
        w = Worker(
            client,
            task_queue=task_queue,
            workflows=workflows,
            activities=activities,
            build_id=build_id,
            promote=promote,
            max_concurrent_activities=max_concurrent_activities,
            eager_workflow_tasks=eager_workflow_tasks,
            eager_activities=eager_activities,
            transactional_activity_results=transactional_activity_results,
            graceful_shutdown_timeout=graceful_shutdown_timeout,
            metrics_registry=registry,
        )
        serving.append(w)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, w.shutdown)
        try:
            await w.run()
        finally:
            await client.close()

    try:
        asyncio.run(run())
    except KadenceError as exc:  # e.g. WorkerCrashedError: exit 1, for the supervisor to restart it
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


@click.command()
@click_options(TimerConfig)
@click.option(
    "--metrics-port",
    type=int,
    envvar="KADENCE_TIMERS_METRICS_PORT",
    default=None,
    help="serve /metrics, /healthz and /readyz on this port [env KADENCE_TIMERS_METRICS_PORT]",
)
@metrics_host_option
@click.pass_obj
def timers(config: KafkaConfig, /, metrics_port: int | None, metrics_host: str, **options: Any) -> None:
    """Run a timer service instance (until SIGTERM/SIGINT). Every option can also be set by the
    environment variable its help names; an option given here wins."""
    from kadence.processors import TimerService

    try:
        settings = TimerConfig.from_env(config, **given_options(TimerConfig, options))
    except KadenceError as exc:  # a setting that does not parse or is out of range
        raise click.UsageError(str(exc)) from exc
    _serve(lambda registry: TimerService(settings, registry=registry), metrics_port, metrics_host, config)
