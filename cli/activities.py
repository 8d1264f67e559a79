"""``kadence activity``: standalone activities (decision 0063) — start one by its own ID with no
workflow around it, wait for its result, describe, cancel and terminate it; over Kafka through
the SDK's client, or through the gateway when ``KADENCE_GATEWAY_URL`` is set."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import click

from kadence.topics import KafkaConfig

from .connected import run_with_client
from .listing import _iso, _redis
from .output import emit_rows, output_option
from .over_http import Gateway, GatewayError, quote
from .projections import _REDIS_URL
from .workflows import _json_args

__all__ = ["activity"]


@click.group()
def activity() -> None:
    """Standalone activities: an activity started by its own ID, with no workflow around it."""


def _run(config: KafkaConfig, work: Callable[[Any], Awaitable[Any]]) -> None:
    """Print ``work(client)``'s value as JSON (``run_with_client``)."""
    out = run_with_client(config, work)
    if out is not None:
        click.echo(json.dumps(out, indent=2, default=str))


def _http(gw: Gateway, method: str, path: str, body: Any = None, **kw: Any) -> None:
    try:
        click.echo(json.dumps(gw.call(method, path, body, **kw), indent=2))
    except GatewayError as exc:
        click.echo(f"error: {exc.message}", err=True)
        sys.exit(1)


def _seconds(value: float | None) -> timedelta | None:
    return None if value is None else timedelta(seconds=value)


@activity.command("start")
@click.argument("activity_type")
@click.option("--id", "activity_id", required=True, help="the activity's ID (apart from workflow IDs)")
@click.option("--task-queue", required=True)
@click.option("--input", "input_json", default="[]", help="JSON array of arguments")
@click.option("--start-to-close", type=click.FloatRange(min=0, min_open=True), default=None, help="seconds per attempt")
@click.option("--schedule-to-close", type=click.FloatRange(min=0, min_open=True), default=None, help="seconds in all")
@click.option("--heartbeat-timeout", type=click.FloatRange(min=0, min_open=True), default=None, help="seconds")
@click.option("--max-attempts", type=click.IntRange(0), default=None, help="0: unlimited (the default)")
@click.option(
    "--id-reuse-policy",
    type=click.Choice(["allow_duplicate", "allow_duplicate_failed_only", "reject_duplicate"]),
    default="allow_duplicate",
)
@click.option("--id-conflict-policy", type=click.Choice(["fail", "use_existing", "terminate_existing"]), default="fail")
@click.option("--wait/--no-wait", default=False, help="wait for the result")
@click.option("--request-id", default=None, help="idempotency key: a retry gets the first answer")
@click.pass_obj
def start(
    config: KafkaConfig | Gateway,
    activity_type: str,
    activity_id: str,
    task_queue: str,
    input_json: str,
    start_to_close: float | None,
    schedule_to_close: float | None,
    heartbeat_timeout: float | None,
    max_attempts: int | None,
    id_reuse_policy: str,
    id_conflict_policy: str,
    wait: bool,
    request_id: str | None,
) -> None:
    """Start a standalone activity of type ACTIVITY_TYPE (one of --start-to-close and
    --schedule-to-close is needed); prints its ID and run ID (and its result with --wait)."""
    args = _json_args(input_json, "--input")
    if isinstance(config, Gateway):
        body: dict[str, Any] = {
            "activity_id": activity_id,
            "task_queue": task_queue,
            "input": args,
            "start_to_close_timeout_seconds": start_to_close,
            "schedule_to_close_timeout_seconds": schedule_to_close,
            "heartbeat_timeout_seconds": heartbeat_timeout,
            "id_reuse_policy": id_reuse_policy,
            "id_conflict_policy": id_conflict_policy,
            "wait_seconds": 60 if wait else 0,
        }
        if max_attempts is not None:
            body["retry_policy"] = {"maximum_attempts": max_attempts}
        _http(config, "POST", f"/v1/activities/{quote(activity_type)}/start", body, idempotency_key=request_id)
        return

    from kadence import RetryPolicy

    async def go(client: Any) -> dict[str, Any]:
        handle = await client.start_activity(
            activity_type,
            *args,
            id=activity_id,
            task_queue=task_queue,
            start_to_close_timeout=_seconds(start_to_close),
            schedule_to_close_timeout=_seconds(schedule_to_close),
            heartbeat_timeout=_seconds(heartbeat_timeout),
            retry_policy=None if max_attempts is None else RetryPolicy(maximum_attempts=max_attempts),
            id_reuse_policy=id_reuse_policy,
            id_conflict_policy=id_conflict_policy,
            request_id=request_id,
        )
        out: dict[str, Any] = {"activity_id": handle.id, "run_id": handle.run_id}
        if wait:
            out["result"] = await handle.result()
        return out

    _run(config, go)


@activity.command("result")
@click.argument("activity_id")
@click.option("--run-id", default=None)
@click.pass_obj
def result(config: KafkaConfig | Gateway, activity_id: str, run_id: str | None) -> None:
    """Wait for ACTIVITY_ID to close; print its result (exit 1 with the failure if it did not complete)."""
    if isinstance(config, Gateway):
        path = f"/v1/activities/{quote(activity_id)}/result"
        try:
            out = config.call("GET", path, params={"run_id": run_id, "wait_seconds": 60})
        except GatewayError as exc:
            click.echo(f"error: {exc.message}", err=True)
            sys.exit(1)
        if out["status"] != "completed":  # as over Kafka: only a result is a success
            failure = out.get("failure") or {}
            click.echo(
                f"error: standalone activity {activity_id!r} {out['status']}: {failure.get('message', '')}", err=True
            )
            sys.exit(1)
        click.echo(json.dumps({"activity_id": activity_id, "result": out["result"]}, indent=2))
        return

    async def go(client: Any) -> dict[str, Any]:
        handle = client.get_activity_handle(activity_id, run_id=run_id)
        return {"activity_id": activity_id, "result": await handle.result()}

    _run(config, go)


@activity.command("describe")
@click.argument("activity_id")
@click.pass_obj
def describe(config: KafkaConfig | Gateway, activity_id: str) -> None:
    """ACTIVITY_ID's status, times, and its attempt, last failure and heartbeat while it runs."""
    if isinstance(config, Gateway):
        _http(config, "GET", f"/v1/activities/{quote(activity_id)}")
        return

    async def go(client: Any) -> dict[str, Any]:
        described = await client.get_activity_handle(activity_id).describe()
        return {"activity_id": activity_id, **described.to_dict()}

    _run(config, go)


def _operator(name: str, summary: str) -> click.Command:
    @click.command(name, help=summary)
    @click.argument("activity_id")
    @click.option("--reason", default="")
    @click.option("--request-id", default=None)
    @click.pass_obj
    def command(config: KafkaConfig | Gateway, activity_id: str, reason: str, request_id: str | None) -> None:
        if isinstance(config, Gateway):
            path = f"/v1/activities/{quote(activity_id)}/{name}"
            _http(config, "POST", path, {"reason": reason}, idempotency_key=request_id)
            return

        async def go(client: Any) -> dict[str, Any]:
            handle = client.get_activity_handle(activity_id)
            await getattr(handle, name)(reason=reason, request_id=request_id)
            return {"activity_id": activity_id, name: "ok"}

        _run(config, go)

    return command


activity.add_command(
    _operator("cancel", "Cancel ACTIVITY_ID: it closes canceled now; its attempt learns it at its next heartbeat.")
)
activity.add_command(_operator("terminate", "Terminate ACTIVITY_ID at once."))


_STATUSES = ("running", "completed", "failed", "canceled", "terminated", "timed_out")


@activity.command("list")
@click.option("--type", "activity_type", default=None, help="activity type")
@click.option("--status", type=click.Choice(_STATUSES), default=None)
@click.option("--page-size", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--cursor", default=None, help="continue after a previous page (printed as next_cursor)")
@click.option("--count", "count_only", is_flag=True, help="print counts by type and status instead")
@output_option
@_REDIS_URL
@click.pass_obj
def list_activities(
    config: KafkaConfig | Gateway,
    activity_type: str | None,
    status: str | None,
    page_size: int,
    cursor: str | None,
    count_only: bool,
    output: str,
    redis_url: str,
) -> None:
    """List standalone activities from the visibility projection, newest start first (over the
    gateway with KADENCE_GATEWAY_URL set: ``GET /v1/activities``)."""
    if isinstance(config, Gateway):
        params = {"type": activity_type, "status": status, "page_size": page_size, "cursor": cursor}
        try:
            page = config.call("GET", "/v1/activities", params={**params, "include_counts": str(count_only).lower()})
        except GatewayError as exc:
            click.echo(f"error: {exc.message}", err=True)
            sys.exit(1)
        rows, counts, nxt = page["activities"], page["counts"], page["next_cursor"]
    else:
        rows, counts, nxt = _list_from_redis(config, activity_type, status, page_size, cursor, count_only, redis_url)
    if count_only:
        click.echo(json.dumps(counts, sort_keys=True))
        return
    for row in rows:
        row["start_time"], row["close_time"] = _iso(row["start_time_ms"]), _iso(row["close_time_ms"])
    columns = ("activity_id", "run_id", "activity_type", "status", "start_time", "close_time")
    emit_rows(rows, columns, output, extra={"next_cursor": nxt})
    if nxt and output != "json":
        click.echo(f"next_cursor: {nxt}", err=True)


def _list_from_redis(
    config: KafkaConfig,
    activity_type: str | None,
    status: str | None,
    page_size: int,
    cursor: str | None,
    count_only: bool,
    redis_url: str,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None, str | None]:
    from kadence.readmodels.visibility import VisibilityFilter, VisibilityReader
    from kadence.topics.standalone import ACTIVITY_KIND, KIND_ATTRIBUTE, listed_activity

    async def go() -> tuple[list[dict[str, Any]], dict[str, Any] | None, str | None]:
        redis = _redis(redis_url)
        try:
            reader = VisibilityReader(redis, config.namespace)
            where = VisibilityFilter(workflow_type=activity_type, status=status, search={KIND_ATTRIBUTE: ACTIVITY_KIND})
            if count_only:
                return [], await reader.count(where), None
            items, nxt = await reader.list(where, page_size=page_size, cursor=cursor)
            return [listed_activity(r) for r in items], None, nxt
        finally:
            await redis.aclose()

    try:
        return asyncio.run(go())
    except Exception as exc:  # noqa: BLE001 - a typed KadenceError, or Redis unreachable and the like
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
