"""Completing an activity from outside the function that ran it (Temporal's async activity
completion): the function calls ``activity.raise_complete_async()``, and another process completes,
fails or heartbeats the attempt through ``Client.get_async_activity_handle``.

The engine does not answer activity results (the workers' hot path produces no replies), so a
handle learns whether its result was taken from the run's history: the event that ended the
attempt is its own completion, or something else ended it first and nothing was recorded for
it (``ActivityNotCurrentError``)."""

from __future__ import annotations

import asyncio
import base64
import binascii
import concurrent.futures as cf
import json
from typing import TYPE_CHECKING, Any

from .describe import describe_to_json
from .errors import ActivityNotCurrentError, ApplicationError, InvalidIdentifierError
from .payload import PayloadConverter
from .protocol import check_found, result_body
from .records import CLOSE_EVENTS, new_id

if TYPE_CHECKING:
    from .engine_client import EngineClient

__all__ = ["AsyncActivityHandle", "parse_task_token", "task_token"]


def task_token(workflow_id: str, run_id: str, activity_id: str, scheduled_seq: int, attempt: int) -> bytes:
    """An attempt's token: what ``AsyncActivityHandle`` needs to complete it (URL-safe)."""
    raw = json.dumps([workflow_id, run_id, activity_id, scheduled_seq, attempt], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode())


def parse_task_token(token: bytes | str) -> tuple[str, str, str, int, int]:
    """(workflow ID, run ID, activity ID, scheduled seq, attempt) of a ``task_token``;
    ``InvalidIdentifierError`` for anything else."""
    try:
        raw = base64.urlsafe_b64decode(token.encode() if isinstance(token, str) else token)
        wf, run_id, activity_id, seq, attempt = json.loads(raw)
        if not (isinstance(seq, int) and isinstance(attempt, int)):
            raise ValueError("not a token")
        return str(wf), str(run_id), str(activity_id), seq, attempt
    except (ValueError, TypeError, binascii.Error) as exc:
        raise InvalidIdentifierError(f"not an activity task token: {exc}", field="task_token") from exc


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
        engine: EngineClient,
        converter: PayloadConverter,
        identity: str,
        *,
        task_token: bytes | str | None = None,
        workflow_id: str | None = None,
        run_id: str | None = None,
        activity_id: str | None = None,
    ) -> None:
        self._engine, self._converter, self._identity = engine, converter, identity
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
        body = {"result": self._converter.to_bytes(result), "eager_workflow_task": None}
        await self._report("RespondActivityTaskCompleted", body)

    async def fail(self, error: BaseException) -> None:
        """Fail the attempt with ``error`` (retried by the activity's retry policy, as a failure
        the function raised would be); ``ActivityNotCurrentError`` if it had ended."""
        await self._report("RespondActivityTaskFailed", {"failure": self._converter.failure(error)})

    async def report_cancellation(self, *details: Any) -> None:
        """Report that the attempt stopped because it was cancelled (not retried)."""
        error = ApplicationError("the activity was cancelled", *details, type="CancelledError", non_retryable=True)
        await self._report("RespondActivityTaskFailed", {"failure": self._converter.failure(error)})

    async def heartbeat(self, *details: Any) -> None:
        """Record progress (and keep a heartbeat timeout away); ``ActivityNotCurrentError`` if
        the attempt ended, ``asyncio.CancelledError`` if the workflow cancelled the activity."""
        seq, attempt = await self._current()
        value = list(details) if len(details) != 1 else details[0]
        reply = await self._engine.request(
            self.workflow_id,
            "RecordActivityHeartbeat",
            {
                "activity_id": self.activity_id,
                "scheduled_seq": seq,
                "attempt": attempt,
                "details": self._converter.to_bytes(value),
                "identity": self._identity,
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
        reply = await self._engine.request(
            self.workflow_id, "AwaitWorkflowResult", result_body(wait=False), request_id=new_id(), run_id=self.run_id
        )
        check_found(reply, self.workflow_id)
        d = describe_to_json(self.workflow_id, reply, self._converter)
        self.run_id = d["run_id"]
        pending = [a for a in d["pending_activities"] if a["activity_id"] == self.activity_id]
        if not pending:
            raise ActivityNotCurrentError(f"{self!r}: no such activity is pending in run {d['run_id']}")
        _run, events = await self._engine.history(self.workflow_id, self.run_id)
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
        return seq, int(pending[0]["attempt"])

    async def _report(self, body_type: str, body: dict[str, Any]) -> None:
        seq, attempt = await self._current()
        identity = f"async:{self._identity}:{new_id()}"  # finds this report in the history
        fut = self._engine.send(
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
            _run, events = await self._engine.history(self.workflow_id, self.run_id)
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
