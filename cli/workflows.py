"""The client commands: ``start``, ``history``, ``signal``, ``query``, ``cancel``, ``terminate``,
``pause``, ``unpause``, ``describe`` and ``reset``: over Kafka with the SDK's client, or, with
``KADENCE_GATEWAY_URL`` set, over the HTTP gateway (``over_http``: one request, no Kafka
connection). Heavy imports wait inside the Kafka paths, so an HTTP call pays only for itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kadence import WorkflowHandle

import json
import logging
import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import click

from .codec import current_codec
from .output import emit_rows
from .over_http import Gateway, GatewayError, quote
from .periods import period_ms

if TYPE_CHECKING:
    from kadence.topics import KafkaConfig

_OUTPUT = click.option(
    "-o",
    "--output",
    "output",
    type=click.Choice(("json", "table")),
    default="json",
    show_default=True,
    help="json: the document; table: one line per field",
)

__all__ = ["cancel", "describe", "history", "pause", "query", "reset", "signal_cmd", "start", "terminate", "unpause"]


@click.command()
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
@click.option(
    "--limit",
    "limits",
    multiple=True,
    metavar="NAME=VALUE:MAX[/PERIOD]",
    help="a concurrency limit the run holds a slot of (repeatable), e.g. --limit tenant=acme:20; with /PERIOD a "
    "rate limit: at most MAX starts per PERIOD (500ms, 1s, 1m, 1h, 1d), e.g. --limit api=stripe:10/1s",
)
@click.option(
    "--debounce",
    type=click.FloatRange(min=0, max=7 * 86400),
    default=0,
    metavar="SECONDS",
    help="a debounced start: the run's code waits this long; another debounced start of the ID meanwhile "
    "joins the run (same run ID), gives it its input and restarts the wait",
)
@click.option(
    "--debounce-max",
    type=click.FloatRange(min=0, max=7 * 86400),
    default=0,
    metavar="SECONDS",
    help="with --debounce: the longest wait from the first start",
)
@click.option("--priority", type=click.IntRange(1, 5), default=None, help="1 (first) to 5 (last); default 3")
@click.option("--fairness-key", default=None, help="within a level, keys share the dispatches by weight (a tenant)")
@click.option("--fairness-weight", type=click.FloatRange(min=0, min_open=True, max=1000), default=None)
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
    limits: tuple[str, ...],
    debounce: float,
    debounce_max: float,
    priority: int | None,
    fairness_key: str | None,
    fairness_weight: float | None,
) -> None:
    """Start a workflow run."""
    args = _json_args(input_json, "--input")
    concurrency = [_limit_option(text) for text in limits]
    order = {"priority_key": priority, "fairness_key": fairness_key, "fairness_weight": fairness_weight}
    if isinstance(config, Gateway):
        search_doc = _json_object(search_json, "--search-attributes")
        extra = _http_start_options(concurrency, debounce, debounce_max, order)
        _start_over_http(
            config,
            workflow_type,
            workflow_id,
            task_queue,
            args,
            request_id,
            wait,
            search_doc,
            cron_schedule,
            extra,
        )
        return
    import asyncio

    from kadence import Client, Limit, Priority
    from kadence import KadenceError as Err

    search = _search_attributes(search_json)

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
                concurrency=[
                    Limit(
                        lim["name"],
                        lim["value"],
                        max=lim["max"],
                        per=None if lim["per_ms"] is None else timedelta(milliseconds=lim["per_ms"]),
                    )
                    for lim in concurrency
                ],
                debounce=timedelta(seconds=debounce) if debounce else None,
                debounce_max=timedelta(seconds=debounce_max) if debounce_max else None,
                priority=Priority(priority, fairness_key, fairness_weight),
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


def _http_start_options(
    concurrency: list[dict[str, Any]], debounce: float, debounce_max: float, order: dict[str, Any]
) -> dict[str, Any]:
    """The start's debounce, priority and limits as the gateway's request body has them."""
    extra: dict[str, Any] = {"debounce_seconds": debounce, "debounce_max_seconds": debounce_max}
    if any(v is not None for v in order.values()):
        extra["priority"] = {k: v for k, v in order.items() if v is not None}
    if concurrency:
        extra["concurrency"] = [
            {k: v for k, v in lim.items() if k != "per_ms"}
            | ({"per_seconds": lim["per_ms"] / 1000} if lim["per_ms"] else {})
            for lim in concurrency
        ]
    return extra


def _search_attributes(search_json: str | None) -> Any:
    """``--search-attributes`` (typed JSON) as the SDK takes them; a bad value is a usage error."""
    from kadence import KadenceError
    from kadence.topics.search_attributes import from_json, from_wire

    try:
        return from_wire(from_json(json.loads(search_json))) if search_json else None
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--search-attributes") from exc
    except KadenceError as exc:
        raise click.BadParameter(str(exc), param_hint="--search-attributes") from exc


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


def _event_row(e: dict[str, Any]) -> dict[str, Any]:
    attrs = e["attributes"] if isinstance(e["attributes"], dict) else {}
    brief = " ".join(f"{k}={attrs[k]}" for k in _EVENT_BRIEF if attrs.get(k) not in (None, ""))
    return {"seq": e["seq"], "time": e["time"], "type": e["type"], "details": brief}


@click.command()
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
    if isinstance(config, Gateway):
        _history_over_http(config, workflow_id, run_id, output, follow)
        return
    import asyncio

    from kadence import KadenceError as Err
    from kadence.storage import open_large_payloads, open_store
    from kadence.topics import EngineClient
    from kadence.topics.archive import ArchiveStoreConfig, read_history
    from kadence.topics.history_json import event_to_json
    from kadence.topics.large_payloads import LargePayloadConfig
    from kadence.topics.payload import JsonConverter
    from kadence.topics.records import CLOSE_EVENTS

    codec = current_codec()

    def show(events: list[dict[str, Any]], first: bool) -> None:
        _show_events(events, output, first, follow=follow)

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


def _handle_command(
    config: KafkaConfig,
    workflow_id: str,
    run_id: str | None,
    action: Callable[[WorkflowHandle], Awaitable[Any]],
    output: str = "json",
) -> None:
    """Connect a client, run ``action(handle)``, print its JSON result; typed errors exit 1."""
    import asyncio

    from kadence import Client
    from kadence import KadenceError as Err

    async def run() -> Any:
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
        _show(out, output)


def _json_args(text: str, hint: str) -> list[Any]:
    try:
        args = json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint=hint) from exc
    if not isinstance(args, list):
        raise click.BadParameter("must be a JSON array of arguments", param_hint=hint)
    return args


@click.command("signal")
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
    if isinstance(config, Gateway):
        body = {"signal": signal_name, "input": args}
        _http(config, "POST", f"/v1/workflows/{quote(workflow_id)}/signals", body, idempotency_key=request_id)
        return
    _handle_command(config, workflow_id, None, lambda h: h.signal(signal_name, *args, request_id=request_id))


@click.command()
@click.argument("workflow_id")
@click.argument("query_name")
@click.option("--input", "input_json", default="[]", help="JSON array of the handler's arguments")
@_OUTPUT
@click.pass_obj
def query(config: KafkaConfig, workflow_id: str, query_name: str, input_json: str, output: str) -> None:
    """Ask a workflow's query handler (a closed run answers from its final state)."""
    args = _json_args(input_json, "--input")
    if isinstance(config, Gateway):
        path = f"/v1/workflows/{quote(workflow_id)}/queries/{quote(query_name)}"
        _show(_http(config, "POST", path, {"input": args})["result"], output)
        return
    _handle_command(config, workflow_id, None, lambda h: h.query(query_name, *args), output)


@click.command()
@click.argument("workflow_id")
@click.option("--reason", default="")
@click.option("--request-id", default=None)
@click.pass_obj
def cancel(config: KafkaConfig, workflow_id: str, reason: str, request_id: str | None) -> None:
    """Request cooperative cancellation (idempotent)."""
    _operator_action(config, "cancel", workflow_id, reason, request_id, audit=False)


@click.command()
@click.argument("workflow_id")
@click.option("--reason", default="")
@click.option("--request-id", default=None)
@click.pass_obj
def terminate(config: KafkaConfig, workflow_id: str, reason: str, request_id: str | None) -> None:
    """End a run at once."""
    _operator_action(config, "terminate", workflow_id, reason, request_id, audit=True)


@click.command()
@click.argument("workflow_id")
@click.option("--reason", default="")
@click.option("--request-id", default=None)
@click.pass_obj
def pause(config: KafkaConfig, workflow_id: str, reason: str, request_id: str | None) -> None:
    """Hold an open run still: no tasks are dispatched and no timers fire until it is unpaused
    (signals are still recorded)."""
    _operator_action(config, "pause", workflow_id, reason, request_id, audit=True)


@click.command()
@click.argument("workflow_id")
@click.option("--reason", default="")
@click.option("--request-id", default=None)
@click.pass_obj
def unpause(config: KafkaConfig, workflow_id: str, reason: str, request_id: str | None) -> None:
    """Let a paused run go on: held tasks are sent, timers that fell due fire."""
    _operator_action(config, "unpause", workflow_id, reason, request_id, audit=True)


@click.command()
@click.argument("workflow_id")
@_OUTPUT
@click.pass_obj
def describe(config: KafkaConfig, workflow_id: str, output: str) -> None:
    """Status of a workflow's current run (and its last failed workflow task, if stuck)."""
    if isinstance(config, Gateway):
        _show(_http(config, "GET", f"/v1/workflows/{quote(workflow_id)}"), output)
        return

    async def describe(handle: WorkflowHandle) -> Any:
        return (await handle.describe()).to_dict()

    _handle_command(config, workflow_id, None, describe, output)


@click.command()
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
    if module_name and not dry_run:
        raise click.UsageError("--module is for --dry-run")
    if isinstance(config, Gateway):
        if module_name:
            raise click.UsageError("--module replays the history here: run it over Kafka (without KADENCE_GATEWAY_URL)")
        body = {"reason": reason, "dry_run": dry_run, **({"to_event": to_event} if to_event is not None else {})}
        answer = _http(config, "POST", f"/v1/workflows/{quote(workflow_id)}/reset", body)
        # the shapes the Kafka path prints
        if dry_run:
            plan = answer.get("plan") or {}
            fields = (
                "branch_event",
                "from_status",
                "terminates_run_id",
                "kept_events",
                "activities_rerun",
                "timers_kept",
            )
            out: dict[str, Any] = {"dry_run": True, "workflow_id": answer["workflow_id"]}
            out.update({f: plan.get(f) for f in fields}, new_run_id=None)
        else:
            out = {"workflow_id": answer["workflow_id"], "new_run_id": answer["run_id"]}
        click.echo(json.dumps(out, indent=2))
        return
    import asyncio

    from kadence import Client, Replayer
    from kadence import KadenceError as Err

    from .definitions import load_definitions

    if module_name and not dry_run:
        raise click.UsageError("--module is for --dry-run")

    async def run() -> Any:
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


def _show(value: Any, output: str) -> None:
    """``value`` as JSON, or as aligned ``field  value`` lines (nested values as compact JSON)."""
    if output == "table" and isinstance(value, dict):
        width = max((len(k) for k in value), default=0)
        for k, v in value.items():
            text = v if isinstance(v, str) else json.dumps(v, default=str, separators=(",", ":"))
            click.echo(f"{k.ljust(width)}  {text}")
        return
    click.echo(json.dumps(value, indent=2, default=str))


def _operator_action(
    config: KafkaConfig | Gateway, action: str, workflow_id: str, reason: str, request_id: str | None, *, audit: bool
) -> None:
    """cancel, terminate, pause or unpause: over the gateway, or with the SDK's handle (the same
    name on both); all but cancel are audited."""
    if audit:
        logging.getLogger("kadence.audit").warning("%s of workflow %s requested from the CLI", action, workflow_id)
    if isinstance(config, Gateway):
        path = f"/v1/workflows/{quote(workflow_id)}/{action}"
        _http(config, "POST", path, {"reason": reason}, idempotency_key=request_id)
        return
    _handle_command(config, workflow_id, None, lambda h: getattr(h, action)(reason=reason, request_id=request_id))


def _json_object(text: str | None, hint: str) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint=hint) from exc
    if not isinstance(value, dict):
        raise click.BadParameter("must be a JSON object", param_hint=hint)
    return value


def _http(gw: Gateway, method: str, path: str, body: Any = None, **kw: Any) -> Any:
    """The gateway's answer; its refusal is printed as ``error: ...`` and exits 1 (as over Kafka)."""
    try:
        return gw.call(method, path, body, **kw)
    except GatewayError as exc:
        click.echo(f"error: {exc.message}", err=True)
        sys.exit(1)


def _limit_option(text: str) -> dict[str, Any]:
    """``--limit NAME=VALUE:MAX[/PERIOD]`` as a ``ConcurrencyLimit``; a usage error that says the form."""
    key, _, spec = text.rpartition(":")
    top, slash, period = spec.partition("/")
    name, eq, value = key.partition("=")
    per_ms = period_ms(period) if slash else None
    if slash and per_ms is None:
        top = ""  # a period that is not NUMBER+UNIT: the usage error below
    if not (eq and name and value and top.isdigit()):
        raise click.BadParameter(
            f"{text!r}: write NAME=VALUE:MAX (a concurrency limit, e.g. tenant=acme:20) or NAME=VALUE:MAX/PERIOD "
            "(a rate limit, e.g. api=stripe:10/1s; PERIOD in ms, s, m, h or d)",
            param_hint="--limit",
        )
    return {"name": name, "value": value, "max": int(top), "per_ms": per_ms}


def _start_over_http(
    gw: Gateway,
    workflow_type: str,
    workflow_id: str,
    task_queue: str,
    args: list[Any],
    request_id: str | None,
    wait: bool,
    search: dict[str, Any] | None,
    cron_schedule: str | None,
    extra: dict[str, Any],
) -> None:
    """``extra``: more of the start's body (``concurrency``, the debounce)."""
    body: dict[str, Any] = {"workflow_id": workflow_id, "task_queue": task_queue, "input": args, **extra}
    if search is not None:
        body["search_attributes"] = search
    if cron_schedule is not None:
        body["cron_schedule"] = cron_schedule
    started = _http(gw, "POST", f"/v1/workflows/{quote(workflow_type)}/start", body, idempotency_key=request_id)
    out: dict[str, Any] = {"workflow_id": started["workflow_id"], "run_id": started["run_id"]}
    if wait:
        out["result"] = _result_over_http(gw, workflow_id, started["run_id"])
    click.echo(json.dumps(out, indent=2))


def _result_over_http(gw: Gateway, workflow_id: str, run_id: str) -> Any:
    """Long-poll the run's history until it closes, then its outcome (a failed run: exit 1)."""
    path = f"/v1/workflows/{quote(workflow_id)}"
    cursor = None
    while True:
        page = _http(gw, "GET", f"{path}/history", params={"run_id": run_id, "cursor": cursor, "wait_seconds": 30})
        cursor = page["next_cursor"]
        if page["closed"]:
            break
    described = _http(gw, "GET", path)
    if described["status"] != "completed":
        click.echo(f"error: workflow {workflow_id} {described['status']}: {described.get('failure')}", err=True)
        sys.exit(1)
    return described.get("result")


def _history_over_http(gw: Gateway, workflow_id: str, run_id: str | None, output: str, follow: bool) -> None:
    """Every page of the run's history; with ``follow``, long-polls for new events until it closes."""
    path = f"/v1/workflows/{quote(workflow_id)}/history"
    events: list[dict[str, Any]] = []
    cursor = None
    first = True
    while True:
        params = {
            "run_id": run_id,
            "cursor": cursor,
            "page_size": 10_000,
            "wait_seconds": 30 if follow and not first else 0,
        }
        page = _http(gw, "GET", path, params=params)
        run_id, cursor = page["run_id"], page["next_cursor"]
        if page.get("archived") and first:
            click.echo(f"run {run_id} of {workflow_id} is archived; read from the archive", err=True)
        fresh = [{**e, "archived": True} if page.get("archived") else e for e in page["events"]]
        if not follow:
            events += fresh
            if not page["has_more"]:
                break
        else:
            _show_events(fresh, output, first, follow=True)
            if page["closed"] and not page["has_more"]:
                break
        first = False
    if not follow:
        _show_events(events, output, True, follow=False)


def _show_events(events: list[dict[str, Any]], output: str, first: bool, *, follow: bool) -> None:
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
