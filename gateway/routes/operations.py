"""Routes for operators: batch operations, stuck runs, dead letters and their redrive, worker
builds, and decoding payloads through the gateway's codec. The operator views read topics with
blocking clients: each runs on a worker thread."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import logging
import uuid
from typing import Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from kadence.topics.backlog import build_backlogs
from kadence.topics.batch import BATCH_TASK_QUEUE, BATCH_WORKFLOW_TYPE, BatchRequest
from kadence.topics.dead_letters import list_dead_letters, redrive
from kadence.topics.errors import (
    BrokerUnavailableError,
    ConfigError,
    KadenceError,
    SchemaError,
)
from kadence.topics.protocol import query_body
from kadence.topics.state_reader import stuck_rows

from ..context import Gateway, principal
from ..errors import ApiError, ErrorResponse, error_response, refused_response
from ..models import BatchStarted, DecodeRequest
from .params import IDEMPOTENCY_KEY, KEYED_IDS, READ, WRITE, WorkflowIdPath

__all__ = ["router"]

audit = logging.getLogger("kadence.audit")

router = APIRouter(prefix="/v1")


@router.post(
    "/batches",
    status_code=201,
    response_model=BatchStarted,
    name="batch",
    responses={**WRITE, 409: {"model": ErrorResponse}},
    summary="Start a batch operation (signal, cancel, terminate, pause, unpause or reset every run a "
    "visibility filter matches), run server-side by `kadence batch worker`",
)
async def start_batch(
    request: Request, gw: Gateway, body: BatchRequest, idempotency_key: str | None = IDEMPOTENCY_KEY
) -> Any:
    who = principal(request)
    try:
        body.check()
    except ConfigError as exc:
        raise ApiError(400, "invalid_input", str(exc)) from exc
    batch_id = (
        f"batch-{uuid.uuid5(KEYED_IDS, f'{who.namespace}/batch/{idempotency_key}')}"
        if idempotency_key
        else f"batch-{uuid.uuid4()}"
    )
    audit.warning(
        "batch %s (%s) in namespace %s requested through the gateway by key %s",
        batch_id,
        body.operation,
        who.namespace,
        who.key_id or "(no auth)",
    )
    payload: dict[str, Any] = {
        "workflow_type": BATCH_WORKFLOW_TYPE,
        "task_queue": BATCH_TASK_QUEUE,
        "input": gw.converter.to_bytes([dataclasses.asdict(body)]),
        "id_reuse_policy": "allow_duplicate",
        "run_timeout_ms": None,
        "search_attributes": {},
    }
    reply, headers = await gw.command(request, who, batch_id, "StartWorkflow", payload, idempotency_key)
    if reply["status"] == "already_started":
        return error_response(409, "already_started", reply["message"], headers=headers, run_id=reply["run_id"])
    return JSONResponse(
        BatchStarted(batch_id=batch_id, run_id=reply["run_id"]).model_dump(), status_code=201, headers=headers
    )


@router.get(
    "/batches/{batch_id}",
    response_model=None,
    responses={**READ, 409: {"model": ErrorResponse}},
    name="batch_progress",
    summary="A batch's progress: runs done of the total, failures with their reasons",
)
async def batch_progress(request: Request, gw: Gateway, batch_id: WorkflowIdPath) -> Any:
    who = principal(request)
    engine = await gw.pool.get(who.namespace)
    reply = await engine.request(
        batch_id,
        "QueryWorkflow",
        query_body("progress", gw.converter.to_bytes([])),
        request_id=str(uuid.uuid4()),
        timeout=gw.config.reply_timeout,
    )
    refused = refused_response(reply, batch_id, "query_rejected")
    if refused is not None:
        return refused
    return {"batch_id": batch_id, **gw.converter.from_bytes(reply["result"])}


# -- operator views: stuck workflows, dead letters, builds (blocking topic reads: a thread each)


@router.get(
    "/stuck",
    response_model=None,
    responses=READ,
    name="stuck",
    summary="Running workflows whose last workflow task failed (non-determinism, undecodable payload), "
    "with the error (reads the state topic)",
)
async def stuck(request: Request, gw: Gateway) -> Any:
    rows = await run_in_threadpool(stuck_rows, gw.namespace_config(principal(request)))
    return {"workflows": rows}


@router.get(
    "/dead-letters",
    response_model=None,
    responses=READ,
    name="dead_letters",
    summary="Records a component could not process, with their origin, reason and whether they were redriven",
)
async def dead_letters(request: Request, gw: Gateway) -> Any:
    entries = await run_in_threadpool(list_dead_letters, gw.namespace_config(principal(request)))
    return {"dead_letters": [e.summary() for e in entries]}


@router.post(
    "/dead-letters/{ref}/redrive",
    response_model=None,
    responses={**WRITE, 409: {"model": ErrorResponse}},
    name="redrive",
    summary="Put a dead letter back on its origin topic, once",
)
async def redrive_dead_letter(
    request: Request, gw: Gateway, ref: str = Path(pattern=r"^[0-9]+:[0-9]+$", max_length=40)
) -> Any:
    who = principal(request)
    audit.warning(
        "redrive of dead letter %s in namespace %s requested through the gateway by key %s",
        ref,
        who.namespace,
        who.key_id or "(no auth)",
    )
    try:
        entry = await run_in_threadpool(lambda: redrive(gw.namespace_config(who), ref, identity="gateway"))
    except BrokerUnavailableError:
        raise
    except KadenceError as exc:  # unknown, or redriven already
        return error_response(409, "redrive_rejected", str(exc))
    return {"ref": ref, "origin_topic": entry.record["origin_topic"]}


@router.get(
    "/builds",
    response_model=None,
    responses=READ,
    name="builds",
    summary="Every worker build of every task queue: the default, the backlog and its oldest task's age",
)
async def builds(request: Request, gw: Gateway) -> Any:
    rows = await run_in_threadpool(build_backlogs, gw.namespace_config(principal(request)))
    return {
        "builds": [
            {
                "task_queue": b.task_queue,
                "build_id": b.build_id,
                "default": b.is_default,
                "backlog": b.backlog,
                "oldest_task_age_s": b.oldest_age_s,
            }
            for b in rows
        ]
    }


@router.post(
    "/codec/decode",
    response_model=None,
    responses=READ,
    summary="Payloads from the log (base64), decoded through the gateway's codec (KADENCE_CODEC) to JSON",
)
async def decode_payloads(request: Request, gw: Gateway, body: DecodeRequest) -> Any:
    """What a console shows an authorised user: each payload's value, or why it could not be
    decoded (``{"error": ...}``, never the bytes). Nothing is read or written but the request."""
    principal(request)
    out = []
    for text in body.payloads:
        try:
            out.append({"value": gw.converter.from_bytes(base64.b64decode(text, validate=True))})
        except (binascii.Error, ValueError):
            out.append({"error": "not base64"})
        except SchemaError as exc:
            out.append({"error": str(exc)})
    return {"payloads": out, "codec": type(gw.config.codec).__name__ if gw.config.codec is not None else None}
