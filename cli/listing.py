"""``kadence list``: workflow runs from the visibility projection (Redis), or over the HTTP
gateway with ``KADENCE_GATEWAY_URL`` set (``GET /v1/workflows``). Light at import, like the other
client commands (``workflows``): the Redis reader is imported on its path only."""

from __future__ import annotations

import json
import re
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn

import click

from .output import emit_rows, output_option
from .over_http import Gateway, GatewayError

if TYPE_CHECKING:
    from kadence.topics import KafkaConfig

__all__ = ["RUN_STATUSES", "list_cmd", "parse_time_ms"]

_REDIS_URL_DEFAULT = "redis://127.0.0.1:6379/0"


def _redis(url: str) -> Any:
    import redis.asyncio as aioredis

    return aioredis.from_url(url, socket_timeout=10, socket_connect_timeout=5)


def _fail(exc: Exception) -> NoReturn:
    click.echo(f"error: {exc}", err=True)
    sys.exit(1)


#: the run statuses (kadence.readmodels.keys.RUN_STATUSES; a unit test keeps them equal)
RUN_STATUSES = ("running", "completed", "failed", "canceled", "terminated", "continued_as_new", "timed_out")

_REL = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")


def parse_time_ms(text: str | None, now: float | None = None) -> int | None:
    """``2024-05-01T12:00:00[+00:00]`` (naive = UTC), ``2024-05-01``, epoch ms, or relative to now:
    ``90s``, ``15m``, ``2h``, ``7d``."""
    if text is None:
        return None
    text = text.strip()
    m = _REL.match(text)
    if m:
        scale = {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
        return int(((now if now is not None else time.time()) - float(m.group(1)) * scale) * 1000)
    if text.isdigit():
        return int(text)
    try:
        dt = datetime.fromisoformat(text)
    except ValueError as exc:
        raise click.BadParameter(f"{text!r}: use ISO-8601, epoch ms, or 30s/15m/2h/7d") from exc
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def _iso(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


@click.command("list")
@click.option("--type", "workflow_type", default=None, help="workflow type")
@click.option("--status", type=click.Choice(RUN_STATUSES), default=None)
@click.option("--paused/--not-paused", default=None, help="only paused runs, or only runs not paused")
@click.option("--since", default=None, help="started at or after (ISO-8601, epoch ms, or 15m/2h/7d ago)")
@click.option("--until", default=None, help="started at or before")
@click.option("--closed-since", default=None, help="closed at or after")
@click.option("--closed-until", default=None, help="closed at or before")
@click.option(
    "--search", "search", multiple=True, metavar="KEY=VALUE", help="search attribute (repeatable, all must match)"
)
@click.option("--page-size", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--cursor", default=None, help="continue after a previous page (printed as next_cursor)")
@click.option("--all", "all_pages", is_flag=True, help="follow the cursors to the end")
@click.option("--count", "count_only", is_flag=True, help="print counts by type and status instead of runs")
@click.option("--json", "as_json", is_flag=True, help="print JSON (the same as -o json)")
@output_option
@click.option(
    "--redis-url",
    envvar="KADENCE_REDIS_URL",
    default=None,
    help="Redis of the projections [env KADENCE_REDIS_URL; default redis://127.0.0.1:6379/0]",
)
@click.pass_obj
def list_cmd(
    config: KafkaConfig,
    workflow_type: str | None,
    status: str | None,
    paused: bool | None,
    since: str | None,
    until: str | None,
    closed_since: str | None,
    closed_until: str | None,
    search: tuple[str, ...],
    page_size: int,
    cursor: str | None,
    all_pages: bool,
    count_only: bool,
    as_json: bool,
    output: str,
    redis_url: str,
) -> None:
    """List workflow runs from the visibility projection, newest start first (over the gateway
    with KADENCE_GATEWAY_URL set: ``GET /v1/workflows``)."""
    if as_json:
        output = "json"
    if isinstance(config, Gateway):
        _list_over_http(
            config, workflow_type, status, paused, (since, until, closed_since, closed_until), search, page_size, cursor,
            all_pages, count_only, output,
        )  # fmt: skip
        return
    import asyncio

    from kadence.readmodels.visibility import VisibilityFilter, VisibilityReader
    from kadence.topics import KadenceError

    redis_url = redis_url or _REDIS_URL_DEFAULT

    pairs = {}
    for item in search:
        if "=" not in item:
            raise click.BadParameter(f"{item!r}: use KEY=VALUE", param_hint="--search")
        k, v = item.split("=", 1)
        pairs[k] = v
    try:
        filters = VisibilityFilter(
            workflow_type=workflow_type,
            status=status,
            start_from_ms=parse_time_ms(since),
            start_to_ms=parse_time_ms(until),
            close_from_ms=parse_time_ms(closed_since),
            close_to_ms=parse_time_ms(closed_until),
            search=pairs or None,
            paused=paused,
        )
    except KadenceError as exc:
        _fail(exc)

    async def go() -> tuple[Any, str | None]:
        redis = _redis(redis_url)
        try:
            reader = VisibilityReader(redis, config.namespace)
            if count_only:
                return await reader.count(filters), None
            items, nxt = await reader.list(filters, page_size=page_size, cursor=cursor)
            while all_pages and nxt:
                more, nxt = await reader.list(filters, page_size=page_size, cursor=nxt)
                items += more
            return items, nxt
        finally:
            await redis.aclose()

    try:
        result, nxt = asyncio.run(go())
    except KadenceError as exc:
        _fail(exc)
    except Exception as exc:  # noqa: BLE001 - Redis unreachable and the like
        _fail(exc)
    _print(result, nxt, count_only, output)


def _print(result: Any, nxt: str | None, count_only: bool, output: str) -> None:
    if count_only:
        if output == "json":
            click.echo(json.dumps(result, sort_keys=True))
            return
        rows = [{"what": "total", "name": "", "count": result["total"]}]
        rows += [{"what": "type", "name": k, "count": v} for k, v in sorted(result["by_type"].items())]
        rows += [{"what": "status", "name": k, "count": v} for k, v in sorted(result["by_status"].items())]
        if output == "tsv":  # as before -o existed: "total\t<n>", then "type\t<name>\t<n>" lines
            for r in rows:
                click.echo("\t".join(str(x) for x in (r["what"], r["name"], r["count"]) if x != ""))
        else:
            emit_rows(rows, ("what", "name", "count"), output)
        return
    if output == "json":
        emit_rows(result, (), "json", extra={"next_cursor": nxt})
        return
    rows = [
        {
            **r,
            "start_time": _iso(r["start_time_ms"]),
            "close_time": _iso(r["close_time_ms"]),
            "status": r["status"] + (" (paused)" if r["paused"] else ""),
        }
        for r in result
    ]
    emit_rows(
        rows,
        ("workflow_id", "run_id", "workflow_type", "status", "start_time", "close_time", "search_attributes"),
        output,
    )
    if nxt:
        click.echo(f"next_cursor: {nxt}", err=True)


def _list_over_http(
    gw: Gateway,
    workflow_type: str | None,
    status: str | None,
    paused: bool | None,
    times: tuple[str | None, str | None, str | None, str | None],
    search: tuple[str, ...],
    page_size: int,
    cursor: str | None,
    all_pages: bool,
    count_only: bool,
    output: str,
) -> None:
    params: list[tuple[str, Any]] = []
    for item in search:
        if "=" not in item:
            raise click.BadParameter(f"{item!r}: use KEY=VALUE", param_hint="--search")
        params.append(("search", item.replace("=", ":", 1)))
    names = ("start_from_ms", "start_to_ms", "close_from_ms", "close_to_ms")
    fixed: dict[str, Any] = {n: parse_time_ms(t) for n, t in zip(names, times, strict=True) if t is not None}
    fixed.update(
        {k: v for k, v in (("type", workflow_type), ("status", status)) if v is not None},
        page_size=1 if count_only else page_size,
    )
    if paused is not None:
        fixed["paused"] = "true" if paused else "false"
    if count_only:
        fixed["include_counts"] = "true"
    items: list[dict[str, Any]] = []
    while True:
        query = [*fixed.items(), *params, *([("cursor", cursor)] if cursor else [])]
        try:
            page = gw.call("GET", "/v1/workflows", params=query)
        except GatewayError as exc:
            click.echo(f"error: {exc.message}", err=True)
            sys.exit(1)
        if count_only:
            _print(page["counts"], None, True, output)
            return
        items += page["workflows"]
        cursor = page["next_cursor"]
        if not (all_pages and cursor):
            break
    _print(items, cursor, False, output)
