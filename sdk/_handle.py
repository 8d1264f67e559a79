"""A handle to a workflow (``WorkflowHandle``): its result, signals, queries, updates, cancel and
terminate, pause and reset, describe and history; made by ``Client`` (``kadence._client``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from kadence.topics.concurrency_reader import add_slot_positions, waited_keys
from kadence.topics.describe import describe_to_json, run_description
from kadence.topics.errors import (
    BrokerUnavailableError,
    QueryFailedError,
    ResetRejectedError,
    WorkflowCanceledError,
    WorkflowContinuedAsNewError,
    WorkflowFailureError,
    WorkflowNotFoundError,
    WorkflowTaskFailedError,
    WorkflowTerminatedError,
    WorkflowTimedOutError,
)
from kadence.topics.history_json import event_to_json
from kadence.topics.identifiers import check_name
from kadence.topics.protocol import (
    cancel_body,
    check_found,
    expect_ok,
    operator_body,
    query_body,
    result_body,
    signal_body,
    update_body,
)
from kadence.topics.records import new_id, run_outcome
from kadence.topics.reset_request import reset_body
from kadence.topics.typed import signature

from ._description import WorkflowExecutionDescription
from ._streams import WorkflowStream
from ._updates import WorkflowUpdateHandle, WorkflowUpdateStage, start_update, update_outcome, update_target
from .interceptors import ClientCall

if TYPE_CHECKING:
    from ._client import Client

_R = TypeVar("_R")

log = logging.getLogger(__name__)

__all__ = ["ResetPlan", "WorkflowHandle", "signal_name"]


@dataclass(frozen=True)
class ResetPlan:
    """What a reset does: the answer of ``WorkflowHandle.plan_reset`` (a dry run)."""

    workflow_id: str
    #: the WorkflowTaskCompleted event the new run branches from
    branch_event: int
    #: status of the run reset ("running": it will be terminated)
    from_status: str
    #: the open run the reset terminates; None when the run is closed already
    terminates_run_id: str | None
    #: events copied into the new run
    kept_events: int
    #: types of the activities the new run schedules again
    activities_rerun: tuple[str, ...]
    timers_kept: int
    new_run_id: str | None = None

    @classmethod
    def from_record(cls, workflow_id: str, plan: dict[str, Any], *, new_run_id: str | None) -> ResetPlan:
        return cls(
            workflow_id=workflow_id,
            branch_event=plan["branch_event"],
            from_status=plan["from_status"],
            terminates_run_id=plan["terminates_run_id"],
            kept_events=plan["kept_events"],
            activities_rerun=tuple(plan["activities_rerun"]),
            timers_kept=plan["timers_kept"],
            new_run_id=new_run_id,
        )

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "activities_rerun": list(self.activities_rerun)}


class WorkflowHandle:
    """A started workflow run.

    Its result is typed by the workflow's run method when the handle came from starting a
    workflow class, or by ``result_type`` (``get_workflow_handle(..., result_type=Receipt)``)."""

    def __init__(
        self, client: Client, workflow_id: str, run_id: str | None, *, result_type: Any = None, run_fn: Any = None
    ) -> None:
        self.client = client
        self.id = workflow_id
        self.run_id = run_id
        self._result_type = result_type
        self._run_fn = run_fn

    def __repr__(self) -> str:
        return f"WorkflowHandle(id={self.id!r}, run_id={self.run_id!r})"

    async def result(self, *, timeout: float | None = None, follow_runs: bool = True) -> Any:
        """Wait for the workflow to close; its result, or ``WorkflowFailureError`` with the cause.

        ``follow_runs``: through continue-as-new, wait for the last run's result."""

        async def impl(_call: ClientCall) -> Any:
            try:
                reply = await self.client.engine.request(
                    self.id,
                    "AwaitWorkflowResult",
                    result_body(wait=True),
                    request_id=new_id(),
                    run_id=None if follow_runs else self.run_id,
                    timeout=timeout,
                )
            except BrokerUnavailableError as exc:
                await self._raise_if_stuck(exc)
                raise
            if reply["status"] == "not_found" and self.run_id and not follow_runs:
                reply = await self._earlier_run() or reply
            return self._outcome(reply)

        return await self.client._intercepted("result", self.id, None, (), impl)

    async def _raise_if_stuck(self, no_reply: BrokerUnavailableError) -> None:
        """After a result did not come in time: when the engine answers that the run is open and
        its workflow task keeps failing (a payload the workers cannot decode, a non-determinism
        error), raise ``WorkflowTaskFailedError`` naming that cause instead of "no reply"."""
        try:  # briefly: the caller's time is up already
            described = await self.describe(timeout=5.0)
        except Exception:  # noqa: BLE001 - the engine does not answer either: "no reply" stands
            return
        stuck = described.last_task_failure
        if described.status == "running" and stuck:
            raise WorkflowTaskFailedError(
                f"workflow {self.id!r} did not finish in time: its workflow task keeps failing "
                f"({stuck['cause']}): {stuck['type']}: {stuck['message']}",
                workflow_id=self.id,
                cause=stuck["cause"],
            ) from no_reply

    async def _earlier_run(self, *, describe: bool = False) -> dict[str, Any] | None:
        """The outcome of ``run_id`` when it is not the workflow's current run (a run before a
        continue-as-new or a reset), read from its history; None if the run has no history.
        ``describe``: with what its history says of it (``description``, as a current run's)."""
        _run_id, events = await self.client.engine.history(self.id, self.run_id)
        outcome = run_outcome(events)
        if outcome is not None and describe:
            outcome["description"] = run_description(events)
            outcome["memo"] = dict(events[0]["attributes"][1].get("memo") or {})
        return outcome

    def _outcome(self, reply: dict[str, Any]) -> Any:
        """The result in an ``AwaitWorkflowResult`` reply, or the error it stands for."""
        check_found(reply, self.id, self.run_id)
        status = reply["status"]
        if status == "completed":
            what = f"result of workflow {self.id!r}"
            if self._result_type is not None:
                return self.client.converter.from_bytes(reply["result"], self._result_type, what=what)
            return self.client.converter.result_from_bytes(reply["result"], self._run_fn, method=True, what=what)
        if status == "timed_out":
            message = (reply["failure"] or {}).get("message") or "timeout"
            raise WorkflowTimedOutError(
                f"workflow {self.id} timed out ({message})",
                failure=reply["failure"],
                workflow_id=self.id,
                run_id=reply["run_id"],
            )
        if status == "terminated":
            reason = (reply["failure"] or {}).get("message") or ""
            raise WorkflowTerminatedError(
                f"workflow {self.id} was terminated: {reason}",
                reason=reason,
                failure=reply["failure"],
                workflow_id=self.id,
                run_id=reply["run_id"],
            )
        if status == "canceled":
            raise WorkflowCanceledError(f"workflow {self.id} was canceled", workflow_id=self.id, run_id=reply["run_id"])
        if status == "continued_as_new":
            raise WorkflowContinuedAsNewError(
                f"run {reply['run_id']} of workflow {self.id} continued as new run {reply['message']}",
                new_run_id=reply["message"] or None,
                workflow_id=self.id,
                run_id=reply["run_id"],
            )
        failure = reply["failure"] or {"type": "Unknown", "message": status}
        err = WorkflowFailureError(
            f"workflow {self.id} failed: {failure['type']}: {failure['message']}",
            failure=failure,
            workflow_id=self.id,
            run_id=reply["run_id"],
        )
        raise err from self.client.converter.exception(failure)

    async def _mutate(self, body_type: str, body: Mapping[str, Any], request_id: str | None) -> dict[str, Any]:
        reply = await self.client.engine.request(
            self.id, body_type, body, request_id=request_id or new_id(), run_id=self.run_id
        )
        return expect_ok(reply, self.id, what=f"{body_type} of {self.id!r} rejected")

    async def signal(self, signal: Any, *args: Any, request_id: str | None = None) -> None:
        """Send a signal; it is recorded in the history in arrival order. A retry with the same
        ``request_id`` is delivered once. ``signal``: its name, or the handler method itself
        (``Order.approve``)."""
        signal = signal_name(signal)

        async def impl(call: ClientCall) -> None:
            await self._mutate(
                "SignalWorkflow",
                # an interceptor may have renamed it: checked again, a typed error if it is no name
                signal_body(
                    check_name(call.name, field="signal"),
                    self.client.converter.to_bytes(list(call.args)),
                    identity=self.client.identity,
                ),
                request_id,
            )

        await self.client._intercepted("signal", self.id, signal, args, impl)

    async def cancel(self, *, reason: str = "", request_id: str | None = None) -> None:
        """Ask the workflow to cancel: its code sees ``asyncio.CancelledError`` at its awaits and
        may clean up (e.g. run compensations) before it ends as canceled. Idempotent."""

        async def impl(_call: ClientCall) -> None:
            await self._mutate("RequestCancelWorkflow", cancel_body(reason), request_id)

        await self.client._intercepted("cancel", self.id, None, (), impl)

    async def terminate(self, *, reason: str = "", request_id: str | None = None) -> None:
        """End the run at once, without running any more workflow code."""

        async def impl(_call: ClientCall) -> None:
            await self._mutate("TerminateWorkflow", operator_body(reason, self.client.identity), request_id)

        await self.client._intercepted("terminate", self.id, None, (), impl)

    async def pause(self, *, reason: str = "", request_id: str | None = None) -> None:
        """Hold the open run still: no workflow or activity task is dispatched and no timer fires
        until ``unpause`` (timers due meanwhile fire then); signals, results and updates are still
        recorded. Pausing a paused run changes nothing."""

        async def impl(_call: ClientCall) -> None:
            await self._mutate("PauseWorkflow", operator_body(reason, self.client.identity), request_id)

        await self.client._intercepted("pause", self.id, None, (), impl)

    async def unpause(self, *, reason: str = "", request_id: str | None = None) -> None:
        """Let a paused run go on: held tasks are dispatched, held timers fire in the order they
        fell due. Unpausing a run that is not paused changes nothing."""

        async def impl(_call: ClientCall) -> None:
            await self._mutate("UnpauseWorkflow", operator_body(reason, self.client.identity), request_id)

        await self.client._intercepted("unpause", self.id, None, (), impl)

    async def reset(
        self, *, to_event: int | None = None, reason: str = "", request_id: str | None = None
    ) -> WorkflowHandle:
        """Branch a new run from a ``WorkflowTaskCompleted`` event of the current run (default:
        the last one); an open run is terminated, a closed one stays as it ended. Returns the new
        run's handle. Raises ``ResetRejectedError`` when the engine refuses. See docs/guide.md for
        what happens to pending activities, timers and children."""

        async def impl(_call: ClientCall) -> dict[str, Any]:
            return await self._reset(to_event, reason, request_id or new_id(), dry_run=False)

        reply = await self.client._intercepted("reset", self.id, None, (), impl)
        return WorkflowHandle(self.client, self.id, reply["run_id"], result_type=self._result_type, run_fn=self._run_fn)

    async def plan_reset(self, *, to_event: int | None = None, reason: str = "") -> ResetPlan:
        """A dry run of ``reset``: the engine runs the reset and rolls it back, so the plan (or the
        ``ResetRejectedError``) is exactly what ``reset`` would give now. Nothing changes."""
        reply = await self._reset(to_event, reason, new_id(), dry_run=True)
        return ResetPlan.from_record(self.id, reply["reset_plan"], new_run_id=None)

    async def _reset(self, to_event: int | None, reason: str, request_id: str, *, dry_run: bool) -> dict[str, Any]:
        raw = await self.history(raw=True)
        if not raw:
            raise WorkflowNotFoundError(f"workflow {self.id!r} has no history to reset", workflow_id=self.id)
        body = reset_body(
            self.id, self.run_id, raw, to_event=to_event, reason=reason, identity=self.client.identity, dry_run=dry_run
        )
        reply = await self.client.engine.request(
            self.id, "ResetWorkflow", body, request_id=request_id, run_id=self.run_id
        )
        what = f"reset of {self.id!r} {'would be ' if dry_run else ''}rejected"
        return expect_ok(reply, self.id, what=what, error=ResetRejectedError)

    async def query(self, query: Any, *args: Any, timeout: float = 30.0, result_type: Any = None) -> Any:
        """Ask the workflow's ``@workflow.query`` handler (a closed run answers from its final
        state); nothing is written to history.

        ``query``: its name, or the handler method itself (``Order.status``), whose return type
        then types the answer; ``result_type`` types it otherwise."""
        handler = query if callable(query) and getattr(query, "__kadence_query__", None) else None
        if handler is not None:
            query = handler.__kadence_query__
        check_name(query, field="query")

        async def impl(call: ClientCall) -> dict[str, Any]:
            return await self.client.engine.request(
                self.id,
                "QueryWorkflow",
                query_body(call.name, self.client.converter.to_bytes(list(call.args))),
                request_id=new_id(),
                timeout=timeout,
            )

        reply = await self.client._intercepted("query", self.id, query, args, impl)
        expect_ok(reply, self.id, what=f"query {query!r} of {self.id!r} failed", error=QueryFailedError)
        what = f"answer to query {query!r} of {self.id!r}"
        if result_type is not None:
            return self.client.converter.from_bytes(reply["result"], result_type, what=what)
        return self.client.converter.result_from_bytes(reply["result"], handler, method=True, what=what)

    async def start_update(
        self,
        update: Any,
        *args: Any,
        wait_for_stage: WorkflowUpdateStage = WorkflowUpdateStage.ACCEPTED,
        id: str | None = None,
        timeout: float | None = None,
        result_type: Any = None,
    ) -> WorkflowUpdateHandle:
        """Send an update and return once it reached ``wait_for_stage`` (default: accepted, its
        validator passed and it is recorded); ``handle.result()`` waits for its result. ``id``
        (default: a new one) is the update's ID: a retry with the same ID is the same update.
        A rejection raises ``WorkflowUpdateFailedError`` here, as ``execute_update`` does."""
        return await start_update(self, update, args, wait_for_stage, id, timeout, result_type)

    def get_update_handle(self, update_id: str, *, name: str = "", result_type: Any = None) -> WorkflowUpdateHandle:
        """A handle of an update sent before, maybe by another process, by its ID: its
        ``result()`` reads the run's history until the update completes."""
        return WorkflowUpdateHandle(self.client, self.id, self.run_id, update_id, name, result_type=result_type)

    async def execute_update(
        self,
        update: Any,
        *args: Any,
        request_id: str | None = None,
        timeout: float | None = None,
        result_type: Any = None,
    ) -> Any:
        """Run the workflow's ``@workflow.update`` handler and return its result.

        ``update``: its name, or the handler method itself (``Cart.add_item``), whose parameter
        and return types then check the arguments here and type the result (``result_type``
        types it otherwise). The validator runs first: a rejection records nothing. An accepted
        update is recorded once: a retry with the same ``request_id`` returns the same result,
        also after the run closed. Raises ``WorkflowUpdateFailedError`` (``.rejected``; the
        handler's exception on ``__cause__``), ``WorkflowNotFoundError``."""
        name, handler = update_target(update)
        if handler is not None:
            signature(handler, method=True).args(list(args), f"update {name!r}")

        async def impl(call: ClientCall) -> Any:
            reply = await self.client.engine.request(
                self.id,
                "UpdateWorkflow",
                update_body(name, self.client.converter.to_bytes(list(call.args)), identity=self.client.identity),
                request_id=request_id or new_id(),
                run_id=self.run_id,
                timeout=timeout,
            )
            return update_outcome(self.client, self.id, name, handler, result_type, reply)

        return await self.client._intercepted("update", self.id, name, args, impl)

    def stream(self, name: str | None = None, *, after: int | None = None, value_type: Any = None) -> WorkflowStream:
        """Follow what the workflow publishes on stream ``name`` (every stream when None):
        ``async for event in handle.stream("progress")``, each a ``StreamEvent`` (``value``
        decoded, as ``value_type`` when given). From the start of the current run, or after the
        event whose ``id`` is ``after``; the iteration ends when the workflow closes. Only what
        the engine accepted is read (docs/guide.md, "Workflow streams")."""
        return WorkflowStream(self, name, after, value_type)

    async def describe(self, *, timeout: float = 30.0) -> WorkflowExecutionDescription:
        """The run as the engine holds it: status, type, task queue, build, start and close
        times, parent and children, pending activities (attempt, last failure, last heartbeat
        and its details, next retry), pending timers, signals received, open updates, search
        attributes, memo, history length, and the last workflow-task failure of a stuck run
        (``last_task_failure``: ``{"cause", "type", "message"}``, e.g. a non-determinism error).
        A ``WorkflowExecutionDescription`` (a status enum, datetimes); ``.to_dict()`` is the JSON
        shape of ``kadence describe`` and ``GET /v1/workflows/{id}`` (docs/guide.md). Indexing it
        as a dict still works, with a ``DeprecationWarning``, for one release."""

        async def impl(_call: ClientCall) -> dict[str, Any]:
            return await self.client.engine.request(
                self.id,
                "AwaitWorkflowResult",
                result_body(wait=False),
                request_id=new_id(),
                run_id=self.run_id,
                timeout=timeout,
            )

        reply = await self.client._intercepted("describe", self.id, None, (), impl)
        if reply["status"] == "not_found" and self.run_id:
            reply = await self._earlier_run(describe=True) or reply
        check_found(reply, self.id)
        described = describe_to_json(self.id, reply, self.client.converter)
        keys = waited_keys(described)
        if keys:  # where it stands in a concurrency limit's queue (its owning partitions read)
            add_slot_positions(described, await self.client.engine.read_limits(keys))
        return WorkflowExecutionDescription.from_json(described)

    async def history(self, *, raw: bool = False) -> list[dict[str, Any]]:
        """The run's history events, oldest first (JSON-friendly dicts unless ``raw``)."""
        run_id, events = await self.client.engine.history(self.id, self.run_id)
        self.run_id = self.run_id or run_id
        return events if raw else [event_to_json(e, self.client.converter) for e in events]


def signal_name(signal: Any) -> str:
    """The name of a signal given as its name or its ``@workflow.signal`` method (anything else:
    ``InvalidIdentifierError``, nothing sent)."""
    if callable(signal):
        signal = getattr(signal, "__kadence_signal__", signal)
    return check_name(signal, field="signal")
