"""Completing an activity from outside the function that ran it (Temporal's async activity
completion): the function calls ``activity.raise_complete_async()``, and another process completes,
fails or heartbeats the attempt through ``Client.get_async_activity_handle``.

The engine does not answer activity results (the workers' hot path produces no replies), so a
handle learns whether its result was taken from the run's history: the event that ended the
attempt is its own completion, or something else ended it first and nothing was recorded for
it (``ActivityNotCurrentError``)."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
from typing import TYPE_CHECKING, Any

from kadence.topics.errors import ActivityNotCurrentError, InvalidIdentifierError
from kadence.topics.records import CLOSE_EVENTS, new_id

from .activity import parse_task_token

if TYPE_CHECKING:
    from ._client import Client

__all__ = ["AsyncActivityHandle"]

#: the events that end an activity attempt
_ENDS = frozenset(
    {
        "ActivityTaskCompleted",
        "ActivityTaskFailed",
        "ActivityTaskAttemptFailed",
        "ActivityTaskTimedOut",
        "ActivityTaskCanceled",
    }
)
POLL_FIRST_S, POLL_MAX_S, SETTLE_TIMEOUT_S = 0.02, 0.5, 60.0


class AsyncActivityHandle:
    """One activity attempt, to complete from anywhere: by its ``task_token``
    (``activity.info().task_token``), or by workflow ID and activity ID (the current attempt)."""

    def __init__(
        self,
        client: Client,
        *,
        task_token: bytes | str | None = None,
        workflow_id: str | None = None,
        run_id: str | None = None,
        activity_id: str | None = None,
    ) -> None:
        self.client = client
        self.run_id: str | None
        if task_token is not None:
            self.workflow_id, self.run_id, self.activity_id, seq, attempt = parse_task_token(task_token)
            self._attempt: tuple[int, int] | None = (seq, attempt)
        elif workflow_id and activity_id:
            self.workflow_id, self.run_id, self.activity_id = workflow_id, run_id, activity_id
            self._attempt = None
        else:
            raise InvalidIdentifierError(
                "an async activity handle needs task_token=, or workflow_id= and activity_id=", field="task_token"
            )

    def __repr__(self) -> str:
        return f"AsyncActivityHandle(workflow_id={self.workflow_id!r}, activity_id={self.activity_id!r})"

    async def complete(self, result: Any = None) -> None:
        """Complete the attempt with ``result``; ``ActivityNotCurrentError`` if it had ended."""
        body = {"result": self.client.converter.to_bytes(result), "eager_workflow_task": None}
        await self._report("RespondActivityTaskCompleted", body)

    async def fail(self, error: BaseException) -> None:
        """Fail the attempt with ``error`` (retried by the activity's retry policy, as a failure
        the function raised would be); ``ActivityNotCurrentError`` if it had ended."""
        await self._report("RespondActivityTaskFailed", {"failure": self.client.converter.failure(error)})

    async def report_cancellation(self, *details: Any) -> None:
        """Report that the attempt stopped because it was cancelled (not retried)."""
        from kadence.topics.errors import ApplicationError

        error = ApplicationError("the activity was cancelled", *details, type="CancelledError", non_retryable=True)
        await self._report("RespondActivityTaskFailed", {"failure": self.client.converter.failure(error)})

    async def heartbeat(self, *details: Any) -> None:
        """Record progress (and keep a heartbeat timeout away); ``ActivityNotCurrentError`` if
        the attempt ended, ``asyncio.CancelledError`` if the workflow cancelled the activity."""
        seq, attempt = await self._current()
        value = list(details) if len(details) != 1 else details[0]
        reply = await self.client._engine.request(
            self.workflow_id,
            "RecordActivityHeartbeat",
            {
                "activity_id": self.activity_id,
                "scheduled_seq": seq,
                "attempt": attempt,
                "details": self.client.converter.to_bytes(value),
                "identity": self.client.identity,
            },
            request_id=new_id(),
            run_id=self.run_id,
        )
        if reply["status"] == "cancel_requested":
            if reply.get("message"):  # "activity attempt is no longer current"
                raise ActivityNotCurrentError(f"{self!r}: {reply['message']}")
            raise asyncio.CancelledError(f"{self!r}: the workflow cancelled the activity")

    # -- how -------------------------------------------------------------------------------------

    async def _current(self) -> tuple[int, int]:
        """(scheduled seq, attempt) of the attempt this handle names: the token's, or the one
        running now (from describe and the history)."""
        if self._attempt is not None:
            return self._attempt
        handle = self.client.get_workflow_handle(self.workflow_id, run_id=self.run_id)
        d = await handle.describe()
        self.run_id = d.run_id
        pending = [a for a in d.pending_activities if a.activity_id == self.activity_id]
        if not pending:
            raise ActivityNotCurrentError(f"{self!r}: no such activity is pending in run {d.run_id}")
        events = await handle.history(raw=True)
        seq = next(
            (
                e["seq"]
                for e in reversed(events)
                if e["attributes"][0] == "ActivityTaskScheduled"
                and e["attributes"][1]["activity_id"] == self.activity_id
            ),
            None,
        )
        if seq is None:  # pragma: no cover - a pending activity was scheduled
            raise ActivityNotCurrentError(f"{self!r}: its scheduling is not in the history")
        return seq, pending[0].attempt

    async def _report(self, body_type: str, body: dict[str, Any]) -> None:
        seq, attempt = await self._current()
        identity = f"async:{self.client.identity}:{new_id()}"  # finds this report in the history
        fut = self.client._engine.send(
            self.workflow_id,
            body_type,
            {**body, "activity_id": self.activity_id, "scheduled_seq": seq, "attempt": attempt, "identity": identity},
            request_id=new_id(),
            run_id=self.run_id,
            expect_reply=False,
        )
        await (asyncio.wrap_future(fut) if isinstance(fut, cf.Future) else fut)  # Kafka has it
        await asyncio.wait_for(self._settled(seq, attempt, identity), SETTLE_TIMEOUT_S)

    async def _settled(self, seq: int, attempt: int, identity: str) -> None:
        """Wait until the history shows what ended the attempt: this report (taken) or anything
        else (``ActivityNotCurrentError``: nothing was recorded for this report)."""
        delay = POLL_FIRST_S
        while True:
            _run, events = await self.client._engine.history(self.workflow_id, self.run_id)
            for ev in events:
                kind, a = ev["attributes"]
                if kind in _ENDS and a["scheduled_seq"] == seq and a["attempt"] >= attempt:
                    if a.get("identity") == identity:
                        return
                    raise ActivityNotCurrentError(
                        f"{self!r}: attempt {attempt} had already ended ({kind}); nothing was recorded"
                    )
                if kind in CLOSE_EVENTS:
                    raise ActivityNotCurrentError(f"{self!r}: the run closed ({kind}); nothing was recorded")
            await asyncio.sleep(delay)
            delay = min(POLL_MAX_S, delay * 2)
