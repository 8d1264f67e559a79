"""The ``kadence`` command line.

The group imports nothing heavy: each command lives in the module ``LAZY`` names and is imported
when it runs (or when ``--help`` lists it), so a command pays only for what it uses.
"""

from __future__ import annotations

import importlib
import logging
import sys

import click

from .codec import CODEC_KEY

__all__ = ["LAZY", "main"]

#: command -> "module:attribute" (modules relative to kadence.cli)
LAZY = {
    "processor": "engine:processor",
    "gateway": "engine:gateway",
    "worker": "engine:worker",
    "timers": "engine:timers",
    "start": "workflows:start",
    "history": "workflows:history",
    "stream": "streams:stream",
    "signal": "workflows:signal_cmd",
    "query": "workflows:query",
    "cancel": "workflows:cancel",
    "terminate": "workflows:terminate",
    "pause": "workflows:pause",
    "unpause": "workflows:unpause",
    "describe": "workflows:describe",
    "reset": "workflows:reset",
    "dlq": "dlq:dlq",
    "topics": "topics:topics",
    "dev": "dev:dev",
    "keys": "keys:keys",
    "builds": "builds:builds",
    "queues": "queues:queues",
    "limits": "limits:limits",
    "stuck": "stuck:stuck",
    "acls": "acls:acls",
    "replay": "replay:replay",
    "archive": "connectors:archive",
    "bridges": "connectors:bridges",
    "projections": "projections:projections",
    "list": "listing:list_cmd",
    "verify": "verify:verify",
    "payloads": "payloads:payloads",
    "batch": "batch:batch",
    "schedules": "schedules:schedules",
    "activity": "activities:activity",
}

#: the commands that go to the HTTP gateway when KADENCE_GATEWAY_URL is set (``over_http``)
OVER_HTTP = frozenset(
    {
        "start",
        "history",
        "stream",
        "signal",
        "query",
        "cancel",
        "terminate",
        "pause",
        "unpause",
        "describe",
        "reset",
        "list",
        "activity",
    }
)

#: the --log-format choices (kadence.topics.config.LOG_FORMATS; a unit test keeps them equal)
LOG_FORMATS = ("text", "json")


class LazyGroup(click.Group):
    """A group whose commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name not in LAZY:
            return command
        module, _, attribute = LAZY[cmd_name].partition(":")
        lazy: click.Command = getattr(importlib.import_module(f"kadence.cli.{module}"), attribute)
        self.add_command(lazy, cmd_name)
        return lazy


def _setup_logging(level: str, fmt: str = "text") -> None:
    from kadence.topics.identifiers import EscapingFormatter
    from kadence.topics.log_context import JsonFormatter

    # one line per message: identifiers from commands are escaped (kadence.topics.identifiers);
    # json: one object per line with the workflow's fields (kadence.topics.log_context)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if fmt == "json" else EscapingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[handler])
    for noisy in ("uvicorn.access",):
        logging.getLogger(noisy).setLevel(logging.WARNING)


@click.group(cls=LazyGroup)
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
@click.option(
    "--gateway-url",
    envvar="KADENCE_GATEWAY_URL",
    default=None,
    help="send the client commands (start, signal, query, describe, history, list, cancel, terminate, "
    "pause, unpause, reset) to this HTTP gateway instead of Kafka [env KADENCE_GATEWAY_URL]",
)
@click.option(
    "--api-key",
    envvar="KADENCE_API_KEY",
    default=None,
    help="the gateway's API key, with --gateway-url [env KADENCE_API_KEY]",
)
@click.pass_context
def main(
    ctx: click.Context,
    bootstrap: str,
    namespace: str,
    log_level: str,
    log_format: str,
    codec: str | None,
    gateway_url: str | None,
    api_key: str | None,
) -> None:
    """Kadence: durable workflows on Kafka."""
    ctx.meta[CODEC_KEY] = codec
    if gateway_url and ctx.invoked_subcommand in OVER_HTTP:
        from .over_http import Gateway

        if codec:
            raise click.UsageError("--codec is not used over the gateway (it encodes with its own codec)")
        explicit = ctx.get_parameter_source("namespace") not in (None, click.core.ParameterSource.DEFAULT)
        ctx.obj = Gateway(gateway_url, api_key, namespace if explicit else None)
        return
    from kadence.topics import KadenceError, KafkaConfig
    from kadence.topics.tracing import configure_from_env

    _setup_logging(log_level, log_format)
    try:
        # made by the first command that needs it (current_codec): a processor or timer service
        # started with KADENCE_CODEC in its environment never imports the application's module
        ctx.obj = KafkaConfig.from_env(bootstrap=bootstrap, namespace=namespace, log_format=log_format)
        # spans to an exporter when OTEL_TRACES_EXPORTER names one (docs/tracing.md)
        configure_from_env(f"kadence-{ctx.invoked_subcommand or 'cli'}")
    except KadenceError as exc:
        raise click.UsageError(str(exc)) from exc
