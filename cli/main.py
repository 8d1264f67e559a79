"""The ``kadence`` command line."""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import json
import logging
import math
import signal
import sys

import click

from kadence.processors.processor_config import ProcessorConfig
from kadence.processors.timer_service import TimerConfig
from kadence.topics import KadenceError, KafkaConfig
from kadence.topics.config import LOG_FORMATS
from kadence.topics.identifiers import EscapingFormatter
from kadence.topics.log_context import JsonFormatter
from kadence.topics.search_attributes import from_json, from_wire
from kadence.topics.settings import click_options, given_options
from kadence.topics.tracing import configure_from_env

from .codec import CODEC_KEY, current_codec
from .definitions import load_definitions
from .health import metrics_host_option
from .output import emit_rows, output_option

__all__ = ["main"]


def _setup_logging(level: str, fmt: str = "text") -> None:
    # one line per message: identifiers from commands are escaped (kadence.topics.identifiers);
    # json: one object per line with the workflow's fields (kadence.topics.log_context)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if fmt == "json" else EscapingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[handler])
    for noisy in ("uvicorn.access",):
        logging.getLogger(noisy).setLevel(logging.WARNING)


@click.group()
@click.option(
    "--bootstrap",
    envvar="KADENCE_KAFKA_BOOTSTRAP",
    default="127.0.0.1:9092",
    show_default=True,
    help="Kafka bootstrap servers [env KADENCE_KAFKA_BOOTSTRAP]",
)
@click.option(
    "--namespace",
    envvar="KADENCE_NAMESPACE",
    default="kadence",
    show_default=True,
    help="topic namespace [env KADENCE_NAMESPACE]",
)
@click.option("--log-level", envvar="KADENCE_LOG_LEVEL", default="info", show_default=True)
@click.option(
    "--log-format",
    envvar="KADENCE_LOG_FORMAT",
    type=click.Choice(LOG_FORMATS),
    default="text",
    show_default=True,
    help="json: one JSON object per line, with workflow_id, run_id, partition and "
    "trace_id where a line is about one workflow [env KADENCE_LOG_FORMAT]",
)
@click.option(
    "--codec",
    envvar="KADENCE_CODEC",
    default=None,
    metavar="MODULE:FACTORY",
    help="payload codec (encryption, compression) for the worker, start, signal, query, result and "
    "history commands; the same one the applications use [env KADENCE_CODEC]",
)
@click.pass_context
def main(
    ctx: click.Context, bootstrap: str, namespace: str, log_level: str, log_format: str, codec: str | None
) -> None:
    """Kadence: durable workflows on Kafka."""
    _setup_logging(log_level, log_format)
    try:
        # made by the first command that needs it (current_codec): a processor or timer service
        # started with KADENCE_CODEC in its environment never imports the application's module
        ctx.meta[CODEC_KEY] = codec
        ctx.obj = KafkaConfig.from_env(bootstrap=bootstrap, namespace=namespace, log_format=log_format)
        # spans to an exporter when OTEL_TRACES_EXPORTER names one (docs/tracing.md)
        configure_from_env(f"kadence-{ctx.invoked_subcommand or 'cli'}")
    except KadenceError as exc:
        raise click.UsageError(str(exc)) from exc


@main.command()
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
def processor(config: KafkaConfig, metrics_port: int | None, metrics_host: str, **options) -> None:
    """Run a history processor instance (until SIGTERM/SIGINT). Every option can also be set by
    the environment variable its help names; an option given here wins."""
    from kadence.processors import HistoryProcessor

    try:
        settings = ProcessorConfig.from_env(config, **given_options(ProcessorConfig, options))
    except KadenceError as exc:  # a setting that does not parse or is out of range
        raise click.UsageError(str(exc)) from exc
    _serve(lambda registry: HistoryProcessor(settings, registry=registry), metrics_port, metrics_host, config)


def _serve(make, metrics_port: int | None, metrics_host: str, config: KafkaConfig) -> None:
    """Run a blocking engine service (``run()``/``stop()``) until SIGTERM/SIGINT, with
    ``/metrics``, ``/healthz`` and ``/readyz`` on ``metrics_host:metrics_port`` when given
    (``kadence.cli.health``); a typed error exits 1."""
    from prometheus_client import CollectorRegistry

    from .health import serve_health

    registry = CollectorRegistry()
    faulthandler.enable(all_threads=True)  # a crash in librdkafka (SIGSEGV, SIGABRT) prints every thread's stack
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 <pid>`: every thread's stack to stderr
    service = make(registry)
    if metrics_port is not None:
        serve_health(config, metrics_port, metrics_host, registry, lambda: service.started)
    signal.signal(signal.SIGTERM, lambda *_: service.stop())
    signal.signal(signal.SIGINT, lambda *_: service.stop())
    try:
        service.run()
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


@main.command()
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
        app = create_app(GatewayConfig.from_env(config, **({"auth": False} if no_auth else {})))
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


@main.command()
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

    faulthandler.enable(all_threads=True)  # a crash in librdkafka (SIGSEGV, SIGABRT) prints every thread's stack
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 <pid>`: every thread's stack to stderr
    registry = CollectorRegistry()
    serving: list = []  # the worker, once it exists (readiness asks it)
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


@main.command()
@click.argument("workflow_type")
@click.option("--id", "workflow_id", required=True)
@click.option("--task-queue", required=True)
@click.option("--input", "input_json", default="[]", help="JSON array of arguments")
@click.option("--request-id", default=None, help="idempotency key: a retry gets the first answer")
@click.option("--wait/--no-wait", default=False, help="wait for the result")
@click.option(
    "--search-attributes",
    "search_json",
    default=None,
    help='JSON object of search attributes, e.g. \'{"Tags": ["eu"], "Priority": 2, "Due": {"datetime": "2027-01-15T09:30:00Z"}}\'',
)
@click.option(
    "--cron-schedule",
    default=None,
    help='a cron workflow: "0 6 * * *", "@hourly", "@every 30s" (CRON_TZ=<zone> prefix)',
)
@click.pass_obj
def start(
    config: KafkaConfig,
    workflow_type: str,
    workflow_id: str,
    task_queue: str,
    input_json: str,
    request_id: str | None,
    wait: bool,
    search_json: str | None,
    cron_schedule: str | None,
) -> None:
    """Start a workflow run."""
    from kadence import Client
    from kadence import KadenceError as Err

    try:
        args = json.loads(input_json)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--input") from exc
    if not isinstance(args, list):
        raise click.BadParameter("must be a JSON array of arguments", param_hint="--input")
    try:
        search = from_wire(from_json(json.loads(search_json))) if search_json else None
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--search-attributes") from exc
    except Err as exc:
        raise click.BadParameter(str(exc), param_hint="--search-attributes") from exc

    async def run() -> None:
        client = await Client.connect(config=config, codec=current_codec())
        try:
            handle = await client.start_workflow(
                workflow_type,
                *args,
                id=workflow_id,
                task_queue=task_queue,
                request_id=request_id,
                search_attributes=search,
                cron_schedule=cron_schedule,
            )
            out = {"workflow_id": handle.id, "run_id": handle.run_id}
            if wait:
                out["result"] = await handle.result()
            click.echo(json.dumps(out, indent=2))
        finally:
            await client.close()

    try:
        asyncio.run(run())
    except Err as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


_EVENT_BRIEF = (
    "activity_type",
    "activity_id",
    "attempt",
    "timer_id",
    "signal_name",
    "update_name",
    "update_id",
    "workflow_type",
    "workflow_id",
    "name",
    "reason",
)


def _event_row(e: dict) -> dict:
    attrs = e["attributes"] if isinstance(e["attributes"], dict) else {}
    brief = " ".join(f"{k}={attrs[k]}" for k in _EVENT_BRIEF if attrs.get(k) not in (None, ""))
    return {"seq": e["seq"], "time": e["time"], "type": e["type"], "details": brief}


@main.command()
@click.argument("workflow_id")
@click.option("--run-id", default=None)
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Choice(("json", "table", "tsv")),
    default="json",
    show_default=True,
    help="json: the events (with --follow one per line); table or tsv: seq, time, type, what it is about",
)
@click.option("--follow", is_flag=True, help="keep printing new events until the run closes")
@click.option(
    "--poll",
    "poll_s",
    type=click.FloatRange(0.1, 60),
    default=1.0,
    show_default=True,
    help="with --follow: seconds between reads",
)
@click.pass_obj
def history(
    config: KafkaConfig, workflow_id: str, run_id: str | None, output: str, follow: bool, poll_s: float
) -> None:
    """Print a run's history; an archived run is read from the archive (configured by
    KADENCE_ARCHIVE_DIR / KADENCE_ARCHIVE_S3_*) and its events carry "archived": true.
    With --follow, new events are printed as the engine records them, until the run closes."""
    from kadence import KadenceError as Err
    from kadence.storage import open_large_payloads, open_store
    from kadence.topics import EngineClient
    from kadence.topics.archive import ArchiveStoreConfig, read_history
    from kadence.topics.history_json import event_to_json
    from kadence.topics.large_payloads import LargePayloadConfig
    from kadence.topics.payload import JsonConverter
    from kadence.topics.records import CLOSE_EVENTS

    from .output import emit_rows

    codec = current_codec()

    def show(events: list[dict], first: bool) -> None:
        if output == "json" and not follow:
            click.echo(json.dumps(events, indent=2))
        elif output == "json":
            for e in events:
                click.echo(json.dumps(e, sort_keys=True))
        elif events or first:
            emit_rows(
                [_event_row(e) for e in events],
                ("seq", "time", "type", "details"),
                output if first or output == "tsv" else "tsv",
            )

    async def run() -> None:
        store = open_store(ArchiveStoreConfig.from_env())
        engine = await asyncio.get_running_loop().run_in_executor(None, EngineClient, config)
        converter = JsonConverter(codec, large=open_large_payloads(LargePayloadConfig.from_env()))
        try:
            found = await read_history(engine, store, workflow_id, run_id)
            events = [
                {**event_to_json(e, converter), "archived": True} if found.archived else event_to_json(e, converter)
                for e in found.events
            ]
            if found.archived:
                click.echo(f"run {found.run_id} of {workflow_id} is archived; read from the archive", err=True)
            show(events, True)
            last = found.events[-1] if found.events else None
            while follow and not found.archived and (last is None or last["attributes"][0] not in CLOSE_EVENTS):
                await asyncio.sleep(poll_s)
                _run, now = await engine.history(workflow_id, found.run_id)
                fresh = [e for e in now if last is None or e["seq"] > last["seq"]]
                if fresh:
                    show([event_to_json(e, converter) for e in fresh], False)
                    last = fresh[-1]
        finally:
            engine.close()

    try:
        asyncio.run(run())
    except Err as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        pass


@main.command()
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
def timers(config: KafkaConfig, metrics_port: int | None, metrics_host: str, **options) -> None:
    """Run a timer service instance (until SIGTERM/SIGINT). Every option can also be set by the
    environment variable its help names; an option given here wins."""
    from kadence.processors import TimerService

    try:
        settings = TimerConfig.from_env(config, **given_options(TimerConfig, options))
    except KadenceError as exc:  # a setting that does not parse or is out of range
        raise click.UsageError(str(exc)) from exc
    _serve(lambda registry: TimerService(settings, registry=registry), metrics_port, metrics_host, config)


def _handle_command(config: KafkaConfig, workflow_id: str, run_id: str | None, action):
    """Connect a client, run ``action(handle)``, print its JSON result; typed errors exit 1."""
    from kadence import Client
    from kadence import KadenceError as Err

    async def run():
        client = await Client.connect(config=config, codec=current_codec())
        try:
            return await action(client.get_workflow_handle(workflow_id, run_id=run_id))
        finally:
            await client.close()

    try:
        out = asyncio.run(run())
    except Err as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    if out is not None:
        click.echo(json.dumps(out, indent=2, default=str))


def _json_args(text: str, hint: str) -> list:
    try:
        args = json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint=hint) from exc
    if not isinstance(args, list):
        raise click.BadParameter("must be a JSON array of arguments", param_hint=hint)
    return args


@main.command("signal")
@click.argument("workflow_id")
@click.argument("signal_name")
@click.option("--input", "input_json", default="[]", help="JSON array of the handler's arguments")
@click.option("--request-id", default=None, help="idempotency key: a retry is delivered once")
@click.pass_obj
def signal_cmd(
    config: KafkaConfig, workflow_id: str, signal_name: str, input_json: str, request_id: str | None
) -> None:
    """Send a signal to a running workflow."""
    args = _json_args(input_json, "--input")
    _handle_command(config, workflow_id, None, lambda h: h.signal(signal_name, *args, request_id=request_id))


@main.command()
@click.argument("workflow_id")
@click.argument("query_name")
@click.option("--input", "input_json", default="[]", help="JSON array of the handler's arguments")
@click.pass_obj
def query(config: KafkaConfig, workflow_id: str, query_name: str, input_json: str) -> None:
    """Ask a workflow's query handler (a closed run answers from its final state)."""
    args = _json_args(input_json, "--input")
    _handle_command(config, workflow_id, None, lambda h: h.query(query_name, *args))


@main.command()
@click.argument("workflow_id")
@click.option("--reason", default="")
@click.option("--request-id", default=None)
@click.pass_obj
def cancel(config: KafkaConfig, workflow_id: str, reason: str, request_id: str | None) -> None:
    """Request cooperative cancellation (idempotent)."""
    _handle_command(config, workflow_id, None, lambda h: h.cancel(reason=reason, request_id=request_id))


@main.command()
@click.argument("workflow_id")
@click.option("--reason", default="")
@click.option("--request-id", default=None)
@click.pass_obj
def terminate(config: KafkaConfig, workflow_id: str, reason: str, request_id: str | None) -> None:
    """End a run at once."""
    logging.getLogger("kadence.audit").warning("terminate of workflow %s requested from the CLI", workflow_id)
    _handle_command(config, workflow_id, None, lambda h: h.terminate(reason=reason, request_id=request_id))


@main.command()
@click.argument("workflow_id")
@click.option("--reason", default="")
@click.option("--request-id", default=None)
@click.pass_obj
def pause(config: KafkaConfig, workflow_id: str, reason: str, request_id: str | None) -> None:
    """Hold an open run still: no tasks are dispatched and no timers fire until it is unpaused
    (signals are still recorded)."""
    logging.getLogger("kadence.audit").warning("pause of workflow %s requested from the CLI", workflow_id)
    _handle_command(config, workflow_id, None, lambda h: h.pause(reason=reason, request_id=request_id))


@main.command()
@click.argument("workflow_id")
@click.option("--reason", default="")
@click.option("--request-id", default=None)
@click.pass_obj
def unpause(config: KafkaConfig, workflow_id: str, reason: str, request_id: str | None) -> None:
    """Let a paused run go on: held tasks are sent, timers that fell due fire."""
    logging.getLogger("kadence.audit").warning("unpause of workflow %s requested from the CLI", workflow_id)
    _handle_command(config, workflow_id, None, lambda h: h.unpause(reason=reason, request_id=request_id))


@main.command()
@click.argument("workflow_id")
@click.pass_obj
def describe(config: KafkaConfig, workflow_id: str) -> None:
    """Status of a workflow's current run (and its last failed workflow task, if stuck)."""

    async def describe(handle):
        return (await handle.describe()).to_dict()

    _handle_command(config, workflow_id, None, describe)


@main.command()
@click.argument("workflow_id")
@click.option("--to-event", type=int, default=None, help="a WorkflowTaskCompleted seq (default: the last one)")
@click.option("--reason", default="")
@click.option(
    "--dry-run",
    is_flag=True,
    help="ask the engine what the reset would do (it runs it and rolls it back); change nothing",
)
@click.option(
    "--module",
    "module_name",
    default=None,
    help="with --dry-run: also replay the kept events against this module's WORKFLOWS",
)
@click.pass_obj
def reset(
    config: KafkaConfig, workflow_id: str, to_event: int | None, reason: str, dry_run: bool, module_name: str | None
) -> None:
    """Branch a new run from a completed workflow task of the current run, open or closed; an
    open run is terminated and linked. Exit 1 when the engine refuses (or would refuse)."""
    from kadence import Client, Replayer
    from kadence import KadenceError as Err

    if module_name and not dry_run:
        raise click.UsageError("--module is for --dry-run")

    async def run():
        client = await Client.connect(config=config, codec=current_codec())
        try:
            handle = client.get_workflow_handle(workflow_id)
            if dry_run:
                plan = await handle.plan_reset(to_event=to_event, reason=reason)
                out = {"dry_run": True, **plan.to_json()}
                if module_name:
                    raw = await handle.history(raw=True)
                    workflows, _ = load_definitions(module_name)
                    Replayer(workflows=workflows).replay([e for e in raw if e["seq"] < plan.branch_event])
                    out["replayed_with"] = module_name
                return out
            logging.getLogger("kadence.audit").warning("reset of workflow %s requested from the CLI", workflow_id)
            new = await handle.reset(to_event=to_event, reason=reason)
            return {"workflow_id": workflow_id, "new_run_id": new.run_id}
        finally:
            await client.close()

    try:
        out = asyncio.run(run())
    except Err as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo(json.dumps(out, indent=2))


@main.group()
def dlq() -> None:
    """Dead letters: records a component could not process."""


@dlq.command("list")
@output_option
@click.pass_obj
def dlq_list(config: KafkaConfig, output: str) -> None:
    """List dead letters: reference, origin, reason, and whether they were redriven."""
    from kadence.topics.dead_letters import list_dead_letters

    rows = []
    for e in list_dead_letters(config):
        row = e.summary()
        del row["key"]
        if output != "json":
            row["reason"] = row["reason"][:120]
        rows.append(row)
    emit_rows(rows, ("ref", "state", "component", "origin", "reason"), output)


@dlq.command("show")
@click.argument("ref")
@click.pass_obj
def dlq_show(config: KafkaConfig, ref: str) -> None:
    """Show one dead letter (REF is partition:offset from `dlq list`)."""
    import base64

    from kadence.topics.dead_letters import list_dead_letters

    found = [e for e in list_dead_letters(config) if e.ref == ref]
    if not found:
        click.echo(f"error: no dead letter {ref}", err=True)
        sys.exit(1)
    r = dict(found[0].record)
    r["key"] = r["key"].decode(errors="replace") if r["key"] else None
    r["value_base64"] = base64.b64encode(r.pop("value") or b"").decode()
    r["redriven"] = found[0].redriven
    click.echo(json.dumps(r, indent=2))


@dlq.command("redrive")
@click.argument("ref")
@click.option(
    "--value-file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="replace the record's value with this file's bytes (a repaired record)",
)
@click.pass_obj
def dlq_redrive(config: KafkaConfig, ref: str, value_file: str | None) -> None:
    """Put a dead letter back on its origin topic, once."""
    from pathlib import Path

    from kadence.topics.dead_letters import redrive

    value = Path(value_file).read_bytes() if value_file else None
    logging.getLogger("kadence.audit").warning("redrive of dead letter %s requested from the CLI", ref)
    try:
        entry = redrive(config, ref, value=value)
    except KadenceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo(f"redriven {ref} to {entry.record['origin_topic']}")


def _register_dev() -> None:
    from .dev import dev
    from .keys import keys

    main.add_command(dev)
    main.add_command(keys)


def _register_builds() -> None:
    from .acls import acls
    from .builds import builds
    from .queues import queues
    from .replay import replay
    from .stuck import stuck
    from .topics import topics

    main.add_command(builds)
    main.add_command(queues)
    main.add_command(topics)
    main.add_command(stuck)
    main.add_command(acls)
    main.add_command(replay)


def _register_connectors() -> None:
    from .connectors import archive, bridges

    main.add_command(archive)
    main.add_command(bridges)


_register_dev()


def _register_projections() -> None:
    from .projections import list_cmd, projections

    main.add_command(projections)
    main.add_command(list_cmd)


def _register_verify() -> None:
    from .batch import batch
    from .payloads import payloads
    from .verify import verify

    main.add_command(verify)
    main.add_command(payloads)
    main.add_command(batch)


_register_projections()
_register_builds()
_register_connectors()
_register_verify()
