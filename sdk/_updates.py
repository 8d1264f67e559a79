"""Updates from the client's side: the name and handler of an update, its outcome from a reply
or from the run's history, and ``WorkflowUpdateHandle`` for an update started without waiting
for its result (``WorkflowHandle.start_update`` / ``get_update_handle``)."""

from __future__ import annotations

import asyncio
import enum
from typing import TYPE_CHECKING, Any

from kadence.topics.errors import WorkflowUpdateFailedError
from kadence.topics.identifiers import check_name
from kadence.topics.protocol import check_found, update_body
from kadence.topics.records import CLOSE_EVENTS, new_id
from kadence.topics.typed import signature

if TYPE_CHECKING:
    from ._client import Client
    from ._handle import WorkflowHandle

__all__ = ["WorkflowUpdateHandle", "WorkflowUpdateStage", "start_update", "update_outcome", "update_target"]

#: how often a handle without the original request reads the history for its outcome (seconds)
POLL_FIRST_S, POLL_MAX_S = 0.05, 1.0


class WorkflowUpdateStage(enum.StrEnum):
    """How far ``start_update`` waits: until the update is ``ACCEPTED`` (its validator passed
    and it is recorded; the handler runs) or ``COMPLETED`` (its result is known)."""

    ACCEPTED = "accepted"
    COMPLETED = "completed"


def update_target(update: Any) -> tuple[str, Any]:
    """(the update's name, its handler or None) from a name or an ``@workflow.update`` method."""
    handler = update if callable(update) and getattr(update, "__kadence_update__", None) else None
    name = handler.__kadence_update__ if handler is not None else update
    check_name(name, field="update")
    return name, handler


def update_outcome(
    client: Client, workflow_id: str, name: str, handler: Any, result_type: Any, reply: dict[str, Any]
) -> Any:
    """The result in an update's reply, or the error it stands for."""
    status = reply["status"]
    if status == "ok":
        what = f"result of update {name!r} of {workflow_id!r}"
        if result_type is not None:
            return client.converter.from_bytes(reply["result"], result_type, what=what)
        return client.converter.result_from_bytes(reply["result"], handler, method=True, what=what)
    check_found(reply, workflow_id)
    failure = reply["failure"]
    rejected = status == "rejected"
    detail = f"{failure['type']}: {failure['message']}" if failure else reply["message"]
    err = WorkflowUpdateFailedError(
        f"update {name!r} of {workflow_id!r} {'rejected' if rejected else 'failed'}: {detail}",
        update_name=name,
        rejected=rejected,
        failure=failure,
        workflow_id=workflow_id,
        run_id=reply["run_id"],
    )
    raise err from client.converter.exception(failure)


def _from_history(events: list[dict[str, Any]], update_id: str) -> tuple[bool, dict[str, Any] | None]:
    """(accepted, the reply-shaped outcome or None) of one update in a run's history; a run that
    closed with the update unfinished answers it failed, as the engine does."""
    accepted = False
    for ev in events:
        kind, a = ev["attributes"]
        if kind == "WorkflowUpdateAccepted" and a["update_id"] == update_id:
            accepted = True
        elif kind == "WorkflowUpdateCompleted" and a["update_id"] == update_id:
            failure = a.get("failure")
            return True, {
                "status": "failed" if failure else "ok",
                "result": a.get("result"),
                "failure": failure,
                "message": failure["message"] if failure else "",
                "run_id": ev["run_id"],
            }
    if events and events[-1]["attributes"][0] in CLOSE_EVENTS and accepted:
        return True, {
            "status": "failed",
            "result": None,
            "failure": None,
            "message": "the run closed before the update completed",
            "run_id": events[-1]["run_id"],
        }
    return accepted, None


class WorkflowUpdateHandle:
    """An update of a workflow, by its ID (the request ID it was sent with). ``result()`` waits
    for its outcome: from the reply to the request this process sent, or else from the run's
    history (an update started by another process, ``get_update_handle``)."""

    def __init__(
        self,
        client: Client,
        workflow_id: str,
        run_id: str | None,
        update_id: str,
        name: str = "",
        *,
        handler: Any = None,
        result_type: Any = None,
        reply: asyncio.Future[dict[str, Any]] | None = None,
    ) -> None:
        self.client = client
        self.workflow_id = workflow_id
        self.workflow_run_id = run_id
        self.id = update_id
        self.name = name
        self._handler = handler
        self._result_type = result_type
        self._reply = reply

    def __repr__(self) -> str:
        return f"WorkflowUpdateHandle(id={self.id!r}, workflow_id={self.workflow_id!r})"

    async def result(self, *, timeout: float | None = None) -> Any:
        """The handler's result; ``WorkflowUpdateFailedError`` if it was rejected or raised;
        ``TimeoutError`` after ``timeout`` seconds."""
        reply: dict[str, Any] | None
        if self._reply is not None:
            reply = await asyncio.wait_for(asyncio.shield(self._reply), timeout)
        else:
            reply = await asyncio.wait_for(self._until(WorkflowUpdateStage.COMPLETED), timeout)
        assert reply is not None, "a completed stage has an outcome"
        return update_outcome(
            self.client, self.workflow_id, self.name or self.id, self._handler, self._result_type, reply
        )

    async def _until(self, stage: WorkflowUpdateStage) -> dict[str, Any] | None:
        """Read the run's history until the update reached ``stage``: its outcome once known
        (None when accepted and still running, for ``ACCEPTED``)."""
        delay = POLL_FIRST_S
        while True:
            if self._reply is not None and self._reply.done():
                return self._reply.result()
            run_id, events = await self.client.engine.history(self.workflow_id, self.workflow_run_id)
            self.workflow_run_id = self.workflow_run_id or run_id
            accepted, outcome = _from_history(events, self.id)
            if outcome is not None or (accepted and stage == WorkflowUpdateStage.ACCEPTED):
                return outcome
            if self._reply is not None:
                await asyncio.wait({self._reply}, timeout=delay)
            else:
                await asyncio.sleep(delay)
            delay = min(POLL_MAX_S, delay * 2)


async def start_update(
    handle: WorkflowHandle,
    update: Any,
    args: tuple[Any, ...],
    wait_for_stage: WorkflowUpdateStage,
    update_id: str | None,
    timeout: float | None,
    result_type: Any,
) -> WorkflowUpdateHandle:
    """``WorkflowHandle.start_update``: send the update (its reply is awaited in a task the
    returned handle's ``result()`` reads), and wait until it reached ``wait_for_stage``."""
    client = handle.client
    name, handler = update_target(update)
    if handler is not None:  # arguments that do not fit the handler: refused before sending
        signature(handler, method=True).args(list(args), f"update {name!r}")
    uid = update_id or new_id()

    async def send() -> dict[str, Any]:
        async def impl(call: Any) -> dict[str, Any]:
            return await client.engine.request(
                handle.id,
                "UpdateWorkflow",
                update_body(name, client.converter.to_bytes(list(call.args)), identity=client.identity),
                request_id=uid,
                run_id=handle.run_id,
                timeout=timeout,
            )

        reply: dict[str, Any] = await client._intercepted("update", handle.id, name, args, impl)
        return reply

    reply = asyncio.get_running_loop().create_task(send(), name=f"update:{uid}")
    up = WorkflowUpdateHandle(
        client, handle.id, handle.run_id, uid, name, handler=handler, result_type=result_type, reply=reply
    )
    try:
        outcome = await asyncio.wait_for(up._until(WorkflowUpdateStage(wait_for_stage)), timeout)
    except BaseException:
        reply.cancel()
        raise
    if outcome is not None and outcome["status"] not in ("ok", "failed"):  # rejected, not found
        update_outcome(client, handle.id, name, handler, result_type, outcome)
    return up
