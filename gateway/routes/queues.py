"""Routes for task queues: what waits on each (backlog and the oldest task's age, the capacity
signal), and the rate limits the owning team sets on a queue's activities (issue 46). A limit
change is audited and kept with who made it, when and why."""

from __future__ import annotations

import logging
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from starlette.concurrency import run_in_threadpool

from kadence.topics.backlog import queue_backlogs
from kadence.topics.concurrency import set_max_body
from kadence.topics.concurrency_reader import read_limits
from kadence.topics.errors import InvalidArgumentError
from kadence.topics.identifiers import TASK_QUEUE_PATTERN
from kadence.topics.protocol import expect_ok
from kadence.topics.queue_limits import QueueLimit, read_queue_limits, set_queue_limit

from ..context import Gateway, principal
from ..errors import ApiError
from ..models import LimitMaxRequest, QueueLimitRequest, TaskQueueParam
from .params import READ, WRITE

__all__ = ["router"]

audit = logging.getLogger("kadence.audit")

router = APIRouter(prefix="/v1")

TaskQueuePath = Annotated[TaskQueueParam, Path(description="the task queue")]


@router.get(
    "/queues",
    response_model=None,
    responses=READ,
    name="queues",
    summary="Every task queue (or one): workflow and activity tasks waiting for a worker, the oldest's age, "
    "the builds and the rate limits",
)
async def queues(
    request: Request,
    gw: Gateway,
    task_queue: str | None = Query(
        None, min_length=1, max_length=100, pattern=TASK_QUEUE_PATTERN, description="only this task queue"
    ),
) -> Any:
    """A queue's backlog age is its capacity signal (``kadence queues``); an eager activity never
    waits on its queue and is not counted. ``limits``: each limited queue's record (who set it,
    when, why)."""
    config = gw.namespace_config(principal(request))

    def read() -> dict[str, Any]:
        known = read_queue_limits(config)  # once: the rows' summaries and the records below
        rows, builds = queue_backlogs(config, task_queue, known)
        limits = [
            limit.describe()
            for q, limit in sorted(known.items())
            if limit.limited and (task_queue is None or q == task_queue)
        ]
        return {"queues": rows, "builds": builds, "limits": limits}

    return await run_in_threadpool(read)


@router.get(
    "/limits",
    response_model=None,
    responses=READ,
    name="concurrency_limits",
    summary="Every concurrency and rate limit key (or one): its max, its holders and its waiters, first come first",
)
async def concurrency_limits(
    request: Request,
    gw: Gateway,
    key: str | None = Query(None, min_length=3, max_length=1201, pattern=r"^[^=]+=.+$", description="only NAME=VALUE"),
) -> Any:
    """Each key as the shard that owns it last committed it (``kadence limits``; decisions 0057
    and 0058): ``in_use`` of ``max`` slots held, ``waiting`` requests, and who, with since when
    (a rate limit: admitted in its window, admitted for later). One key: read from its owning
    partition alone."""
    config = gw.namespace_config(principal(request))

    def read() -> dict[str, Any]:
        return {"limits": read_limits(config, None if key is None else [key])}

    return await run_in_threadpool(read)


@router.put(
    "/queues/{task_queue}/limits",
    response_model=None,
    responses=WRITE,
    name="set_queue_limits",
    summary="Set a task queue's activity rate limits (per second, across all its workers; per activity type)",
)
async def set_limits(request: Request, gw: Gateway, task_queue: TaskQueuePath, body: QueueLimitRequest) -> Any:
    """The queue's workers apply the change within about a second; a task beyond the limit waits
    in the queue's backlog. Replaces the queue's previous limits."""
    if body.activities_per_second is None and not body.activity_types and not body.activity_concurrency:
        raise ApiError(
            400,
            "invalid_input",
            "give activities_per_second, activity_types or activity_concurrency (to lift the limits: DELETE this "
            "resource)",
        )
    return await _write(
        request,
        gw,
        task_queue,
        body.activities_per_second,
        body.activity_types,
        body.reason,
        body.activity_concurrency,
    )


@router.delete(
    "/queues/{task_queue}/limits",
    response_model=None,
    responses=WRITE,
    name="lift_queue_limits",
    summary="Lift a task queue's activity rate limits",
)
async def lift_limits(
    request: Request, gw: Gateway, task_queue: TaskQueuePath, reason: str = Query("", max_length=500)
) -> Any:
    return await _write(request, gw, task_queue, None, {}, reason, {})


async def _write(
    request: Request,
    gw: Gateway,
    task_queue: str,
    per_second: float | None,
    types: dict[str, float],
    reason: str,
    concurrency: dict[str, int],
) -> dict[str, Any]:
    who = principal(request)
    try:  # checked before anything is written or audited
        QueueLimit(task_queue, per_second, types, reason=reason, activity_concurrency=concurrency)
    except InvalidArgumentError as exc:
        raise ApiError(400, "invalid_input", str(exc), field=exc.field) from exc
    audit.warning(
        "rate limits of task queue %s in namespace %s set to %s through the gateway by key %s",
        task_queue,
        who.namespace,
        {"activities_per_second": per_second, "activity_types": types, "activity_concurrency": concurrency}
        if per_second or types or concurrency
        else "none",
        who.key_id or "(no auth)",
    )
    limit = await run_in_threadpool(
        lambda: set_queue_limit(
            gw.namespace_config(who),
            task_queue,
            per_second,
            types,
            identity=f"gateway:{who.key_id or 'anonymous'}",
            reason=reason,
            activity_concurrency=concurrency,
        )
    )
    return limit.describe()


LimitKeyPath = Annotated[str, Path(min_length=3, max_length=1201, pattern=r"^[^=]+=.+$", description="NAME=VALUE")]


@router.put(
    "/limits/{key}",
    response_model=None,
    responses=WRITE,
    name="set_limit_max",
    summary="An operator's max for a concurrency (or rate) limit key, instead of the max its requests name",
)
async def set_limit_max(request: Request, gw: Gateway, key: LimitKeyPath, body: LimitMaxRequest) -> Any:
    """Applied by the shard that owns the key, at once (a higher max admits waiters), until
    lifted (``DELETE``); the key's record keeps who, when and why. Audited."""
    return await _set_max(request, gw, key, body.max, body.per_seconds, body.reason)


@router.delete(
    "/limits/{key}",
    response_model=None,
    responses=WRITE,
    name="lift_limit_max",
    summary="Lift the operator's max of a limit key: the max its requests name applies again",
)
async def lift_limit_max(
    request: Request,
    gw: Gateway,
    key: LimitKeyPath,
    per_seconds: float | None = Query(None, gt=0, le=7 * 86400, description="the key's rate limit"),
    reason: str = Query("", max_length=500),
) -> Any:
    return await _set_max(request, gw, key, 0, per_seconds, reason)


async def _set_max(
    request: Request, gw: Gateway, key: str, top: int, per_seconds: float | None, reason: str
) -> dict[str, Any]:
    who = principal(request)
    name, _, value = key.partition("=")
    per_ms = None if per_seconds is None else round(per_seconds * 1000)
    identity = f"gateway:{who.key_id or 'anonymous'}"
    try:  # checked before anything is sent or audited
        target, cmd = set_max_body(name, value, top, per_ms=per_ms, identity=identity, reason=reason)
    except InvalidArgumentError as exc:
        raise ApiError(400, "invalid_input", str(exc), field=exc.field) from exc
    audit.warning(
        "the max of limit %r in namespace %s %s through the gateway by key %s",
        target,
        who.namespace,
        f"set to {top}" if top else "lifted",
        who.key_id or "(no auth)",
    )
    engine = await gw.pool.get(who.namespace)
    reply = await engine.request(
        target, "ConcurrencySlot", cmd, request_id=str(uuid.uuid4()), timeout=gw.config.reply_timeout
    )
    expect_ok(reply, target, what=f"the max of {target} not set")
    return {
        "key": key,
        "kind": "concurrency" if per_ms is None else "rate",
        "max": top or None,
        "message": reply["message"],
    }
