"""Standalone activities (decision 0063): an activity a client starts by its own ID, without a
workflow (``Client.start_activity``, ``Client.execute_activity``), and its handle
(``ActivityHandle``: result, describe, cancel, terminate, history). The engine holds one as a run
keyed ``kadence-activity:{id}`` (``kadence.topics.standalone``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from kadence.schemas.records import ActivityOptions, StartWorkflow
from kadence.topics.errors import (
    ActivityAlreadyStartedError,
    ActivityExecutionError,
    ActivityFailedError,
    ActivityNotFoundError,
    WorkflowAlreadyStartedError,
    WorkflowCanceledError,
    WorkflowError,
    WorkflowFailureError,
    WorkflowNotFoundError,
    WorkflowTerminatedError,
    WorkflowTimedOutError,
)
from kadence.topics.identifiers import check_task_queue
from kadence.topics.records import new_id
from kadence.topics.standalone import activity_key, activity_start_body, reuse_policy_of

from ._definitions import Limit, Priority, RetryPolicy, limit_records, priority_record, to_ms
from ._description import WorkflowExecutionDescription
from ._handle import WorkflowHandle
from ._streams import WorkflowStream
from .workflow import _activity_type

if TYPE_CHECKING:
    from ._client import Client

__all__ = ["ActivityHandle", "ActivityStart", "start_activity"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class ActivityStart:
    """What ``Client.start_activity`` is asked: the activity, its ID and its options."""

    activity: Callable[..., Any] | str
    args: tuple[Any, ...]
    id: str
    task_queue: str
    start_to_close_timeout: timedelta | None = None
    schedule_to_close_timeout: timedelta | None = None
    schedule_to_start_timeout: timedelta | None = None
    heartbeat_timeout: timedelta | None = None
    retry_policy: RetryPolicy | None = None
    id_reuse_policy: str = "allow_duplicate"
    id_conflict_policy: str = "fail"
    search_attributes: dict[str, Any] | None = None
    concurrency: Iterable[Limit] | None = None
    priority: Priority | int | None = None
    result_type: Any = None

    def options(self) -> ActivityOptions:
        return {
            "task_queue": check_task_queue(self.task_queue),
            "schedule_to_close_timeout_ms": to_ms(self.schedule_to_close_timeout),
            "schedule_to_start_timeout_ms": to_ms(self.schedule_to_start_timeout),
            "start_to_close_timeout_ms": to_ms(self.start_to_close_timeout),
            "heartbeat_timeout_ms": to_ms(self.heartbeat_timeout),
            "retry_policy": self.retry_policy.to_record() if self.retry_policy else None,  # type: ignore[typeddict-item]
            "concurrency": limit_records(self.concurrency),
            "priority": priority_record(self.priority),
        }

    def body(self, client: Client, activity_type: str, headers: dict[str, Any]) -> StartWorkflow:
        return activity_start_body(
            activity_type,
            client.converter.to_bytes(list(self.args)),
            self.options(),
            id_reuse_policy=reuse_policy_of(self.id_reuse_policy, self.id_conflict_policy),
            search_attributes=self.search_attributes,
            headers={str(k): str(v) for k, v in headers.items()},
        )


async def start_activity(
    client: Client, ask: ActivityStart, *, request_id: str | None, timeout: float
) -> ActivityHandle:
    """Start a standalone activity (``Client.start_activity``)."""
    key = activity_key(ask.id)  # bad input fails before anything is sent
    activity_type, result_fn = _activity_type(ask.activity, ask.result_type)

    async def impl(call: Any) -> ActivityHandle:
        body = ask.body(client, activity_type, call.headers)
        rid = request_id or new_id()
        reply = await client.engine.request(key, "StartWorkflow", body, request_id=rid, timeout=timeout)
        if reply["status"] == "already_started" and ask.id_conflict_policy == "use_existing":
            existing = ActivityHandle(client, ask.id, reply["run_id"], result_fn=result_fn)
            if (await existing.describe()).status.value == "running":
                return existing
        if reply["status"] == "already_started":
            raise ActivityAlreadyStartedError(
                f"standalone activity {ask.id!r}: {reply['message']}",
                activity_id=ask.id,
                run_id=reply["run_id"],
                engine_message=reply["message"] or "",
            )
        if reply["status"] != "ok":
            raise ActivityExecutionError(
                f"start of standalone activity {ask.id!r} rejected: {reply['message']}",
                activity_id=ask.id,
                engine_message=reply["message"] or "",
            )
        return ActivityHandle(client, ask.id, reply["run_id"], result_fn=result_fn)

    handle: ActivityHandle = await client._intercepted("start_activity", key, activity_type, ask.args, impl)
    return handle


class ActivityHandle:
    """A standalone activity: its result, description, history, cancel and terminate. Its
    result is typed by the activity function's return type (or ``result_type``)."""

    def __init__(
        self, client: Client, activity_id: str, run_id: str | None, *, result_type: Any = None, result_fn: Any = None
    ) -> None:
        self.client = client
        self.id = activity_id
        self.run_id = run_id
        self._run = WorkflowHandle(client, activity_key(activity_id), run_id, result_type=result_type, run_fn=result_fn)

    def __repr__(self) -> str:
        return f"ActivityHandle(id={self.id!r}, run_id={self.run_id!r})"

    async def result(self, *, timeout: float | None = None) -> Any:
        """Wait for the activity to close (through its retries): its result, the same for every
        caller; ``ActivityFailedError`` (``status``: failed, timed_out, canceled, terminated)
        with the activity's error as ``__cause__`` when it did not complete."""
        return await self._translated(self._run.result(timeout=timeout, follow_runs=self.run_id is None), "result")

    async def describe(self, *, timeout: float = 30.0) -> WorkflowExecutionDescription:
        """The run as the engine holds it: status, start and close times, and its activity
        (attempt, last failure, last heartbeat and its details, next retry) while it runs."""
        return await self._translated(self._run.describe(timeout=timeout), "describe")

    async def cancel(self, *, reason: str = "", request_id: str | None = None) -> None:
        """Cancel the activity: the run closes canceled at once; the running attempt learns it at
        its next heartbeat (``asyncio.CancelledError`` in the activity), and its result is
        ignored. A closed activity: ``ActivityExecutionError``."""
        await self._translated(self._run.cancel(reason=reason, request_id=request_id), "cancel")

    async def terminate(self, *, reason: str = "", request_id: str | None = None) -> None:
        """Close the run as terminated at once (the attempt is not told)."""
        await self._translated(self._run.terminate(reason=reason, request_id=request_id), "terminate")

    def stream(self, name: str | None = None, *, after: int | None = None, value_type: Any = None) -> WorkflowStream:
        """Follow what the activity publishes (``activity.publish``) on stream ``name`` (every
        stream when None): only the accepted attempt's values, each once; the iteration ends
        when the activity closes (docs/guide.md, "Workflow streams")."""
        return self._run.stream(name, after=after, value_type=value_type)

    async def history(self) -> list[dict[str, Any]]:
        """The run's history events, oldest first (JSON-friendly dicts)."""
        return await self._translated(self._run.history(), "history")

    async def _translated(self, awaitable: Awaitable[_T], what: str) -> _T:
        """``awaitable``'s value, its workflow errors as the standalone activity's."""
        common = {"activity_id": self.id}
        try:
            return await awaitable
        except WorkflowNotFoundError as exc:
            raise ActivityNotFoundError(f"standalone activity {self.id!r} not found", **common) from exc
        except WorkflowAlreadyStartedError as exc:  # pragma: no cover - a handle does not start
            raise ActivityAlreadyStartedError(str(exc), run_id=exc.run_id, **common) from exc
        except (WorkflowFailureError, WorkflowCanceledError) as exc:
            status = _STATUS.get(type(exc), "failed")
            failure = getattr(exc, "failure", None)
            message = (failure or {}).get("message") or status
            error = ActivityFailedError(
                f"standalone activity {self.id!r} {status.replace('_', ' ')}: {message}",
                status=status,
                failure=failure,
                run_id=exc.run_id,
                **common,
            )
            raise error from (exc.__cause__ or exc)
        except WorkflowError as exc:
            said = exc.engine_message.replace("workflow", "activity") or str(exc)
            raise ActivityExecutionError(
                f"{what} of standalone activity {self.id!r} rejected: {said}",
                run_id=exc.run_id,
                engine_message=exc.engine_message,
                **common,
            ) from exc


_STATUS: dict[type, str] = {
    WorkflowTerminatedError: "terminated",
    WorkflowTimedOutError: "timed_out",
    WorkflowCanceledError: "canceled",
    WorkflowFailureError: "failed",
}
