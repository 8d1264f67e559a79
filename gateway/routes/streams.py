"""A workflow's streams as Server-Sent Events (decision 0062): ``GET
/v1/workflows/{workflow_id}/streams/{stream}``. Each value is an event whose ``id`` is its offset
on ``{ns}.streams``; a client that reconnects with ``Last-Event-ID`` (or ``?after=``) gets what
came after it, nothing twice. The response ends with an ``end`` event when the workflow closes.

The readers of one gateway share one Kafka consumer (``kadence.topics.stream_hub``): readers
cost the engine nothing, and a thousand of them on one workflow cost Kafka one fetch."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from kadence.topics.describe import describe_to_json
from kadence.topics.errors import KadenceError
from kadence.topics.protocol import check_found, result_body
from kadence.topics.stream_hub import follow_described
from kadence.topics.streams import check_stream

from ..context import Gateway, GatewayContext, principal
from ..errors import ApiError
from ..guard import Principal
from .params import READ, WorkflowIdPath

__all__ = ["router", "stream_events"]

router = APIRouter(prefix="/v1")

#: a comment line this often keeps proxies from closing an idle stream
KEEPALIVE_S = 15.0


def _after(last_event_id: str | None, after: int | None) -> int | None:
    if last_event_id is None or not last_event_id.strip():
        return after
    try:
        value = int(last_event_id)
    except ValueError:
        raise ApiError(400, "invalid_input", "Last-Event-ID must be an event's id", field="Last-Event-ID") from None
    if value < -1:
        raise ApiError(400, "invalid_input", "Last-Event-ID must be an event's id", field="Last-Event-ID")
    return value


@router.get(
    "/workflows/{workflow_id}/streams/{stream}",
    responses={**READ, 200: {"content": {"text/event-stream": {}}, "description": "Server-Sent Events"}},
    summary="Follow a workflow's stream (Server-Sent Events; resume with Last-Event-ID)",
    response_class=StreamingResponse,
)
async def follow(
    request: Request,
    gw: Gateway,
    workflow_id: WorkflowIdPath,
    stream: str,
    after: int | None = Query(None, ge=-1, description="resume after this event id (as Last-Event-ID)"),
    last_event_id: str | None = Header(None, alias="Last-Event-ID", max_length=40),
) -> StreamingResponse:
    name = check_stream(stream)  # InvalidIdentifierError: 400
    return await stream_events(gw, principal(request), workflow_id, name, _after(last_event_id, after))


async def stream_events(
    gw: GatewayContext, who: Principal, workflow_id: str, name: str, start: int | None
) -> StreamingResponse:
    """The Server-Sent Events of ``workflow_id``'s stream ``name`` after event ``start`` (None:
    from its current run's start), for ``who`` (the API's route, the console's live view)."""
    engine = await gw.pool.get(who.namespace)
    reply = await engine.request(
        workflow_id,
        "AwaitWorkflowResult",
        result_body(wait=False),
        request_id=str(uuid.uuid4()),
        timeout=gw.config.reply_timeout,
    )
    check_found(reply, workflow_id)  # WorkflowNotFoundError: 404, before the response starts
    described = describe_to_json(workflow_id, reply, gw.converter)

    async def events() -> AsyncIterator[str]:
        # the reader is made here, where the finally below closes it: a client gone before the
        # body starts leaves no reader behind in the hub
        reader = follow_described(engine, described, stream=name, after=start)
        if reader is None:  # closed without publishing anything
            yield "event: end\ndata: {}\n\n"
            return
        it = reader.__aiter__()
        try:
            while True:
                try:
                    entry = await asyncio.wait_for(it.__anext__(), KEEPALIVE_S)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                except StopAsyncIteration:
                    return
                except KadenceError as exc:  # the gateway's reader stopped: the client resumes with Last-Event-ID
                    yield f"event: error\ndata: {json.dumps({'message': str(exc)})}\n\n"
                    return
                if entry.end:
                    yield f"id: {entry.offset}\nevent: end\ndata: {{}}\n\n"
                    return
                yield f"id: {entry.offset}\nevent: value\ndata: {gw.rendered.get(who.namespace, entry, gw.converter)}\n\n"
        finally:
            close = getattr(reader, "aclose", None)
            if close is not None:
                await close()

    return StreamingResponse(
        events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
