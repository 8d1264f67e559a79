"""Builders for the records that cross Kafka, shared by every component.

Records are plain dicts matching the Avro schemas in ``kadence.schemas``; unions of records
(a command's body, an event's attributes, a workflow command) are ``(name, dict)`` tuples.
"""

from __future__ import annotations

import itertools
import os
import time
import uuid
from collections.abc import Mapping
from typing import Any

from kadence.schemas.records import Failure

__all__ = [
    "CLOSE_EVENTS",
    "COMMAND_EVENT_TYPES",
    "HISTORY_LIMIT_EVENTS",
    "HISTORY_WARN_EVENTS",
    "INLINE_EVENT_TYPES",
    "RUN_NAMESPACE",
    "attrs",
    "command",
    "event_type",
    "failure_record",
    "history_key",
    "idempotency_key",
    "new_id",
    "now_ms",
    "run_outcome",
    "start_run_id",
]

#: history events that record a decision of workflow code (replay compares commands with these)
COMMAND_EVENT_TYPES = frozenset(
    {
        "ActivityTaskScheduled",
        "WorkflowExecutionCompleted",
        "WorkflowExecutionFailed",
        "TimerStarted",
        "TimerCanceled",
        "ActivityTaskCancelRequested",
        "WorkflowExecutionCanceled",
        "WorkflowExecutionContinuedAsNew",
        "MarkerRecorded",
        "SearchAttributesUpserted",
        "StartChildWorkflowExecutionInitiated",
        "RequestCancelExternalInitiated",
        "WorkflowUpdateCompleted",
        "StreamRecordPublished",
    }
)
#: the events that close a run, and the run status each one leaves (the one definition)
#: a run's history this long gets a warning (and ``workflow.info().continue_as_new_suggested``);
#: at the limit the run fails, pointing at continue-as-new
HISTORY_WARN_EVENTS = 10_000
HISTORY_LIMIT_EVENTS = 50_000

CLOSE_EVENTS = {
    "WorkflowExecutionCompleted": "completed",
    "WorkflowExecutionFailed": "failed",
    "WorkflowExecutionCanceled": "canceled",
    "WorkflowExecutionTerminated": "terminated",
    "WorkflowExecutionTimedOut": "timed_out",
    "WorkflowExecutionContinuedAsNew": "continued_as_new",
}


def failure_record(error_type: str, message: str) -> Failure:
    """A non-retryable ``Failure`` record the engine itself writes (termination, timeouts)."""
    return {
        "type": error_type,
        "message": message,
        "stack_trace": "",
        "non_retryable": True,
        "details": None,
        "cause": None,
    }


def run_outcome(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A run's outcome read from its history events (decoded records, in seq order), shaped like an
    ``AwaitWorkflowResult`` reply: ``status``, ``result``, ``failure``, ``message`` (the next run's
    ID after continue-as-new). ``None`` when there are no events; status ``running`` when no
    closing event was recorded yet."""
    if not events:
        return None
    kind, a = events[-1]["attributes"]
    status = CLOSE_EVENTS.get(kind, "running")
    failure, result, message = None, None, ""
    if kind == "WorkflowExecutionCompleted":
        result = a["result"]
    elif kind == "WorkflowExecutionFailed":
        failure = a["failure"]
    elif kind == "WorkflowExecutionTerminated":
        failure = failure_record("Terminated", a["reason"] or "terminated")
    elif kind == "WorkflowExecutionTimedOut":
        failure = failure_record("TimeoutError", f"workflow {a['timeout_type']} timeout")
    elif kind == "WorkflowExecutionCanceled":
        failure = failure_record("CancelledError", "workflow canceled")
    elif kind == "WorkflowExecutionContinuedAsNew":
        message = a["new_run_id"]
    return {"status": status, "run_id": events[-1]["run_id"], "result": result, "failure": failure, "message": message}


#: recorded by the engine inside a workflow task's block of command events (not a command echo)
INLINE_EVENT_TYPES = frozenset({"ActivityTaskCanceled"})


def now_ms() -> int:
    return int(time.time() * 1000)


class _IdSource:
    """Unique IDs in UUID form: 74 random bits drawn once per process, then a 48-bit counter.

    ``uuid.uuid4()`` per event and request was 6-9 % of the history processor's CPU; this is a
    sixth of its cost. IDs stay unique across processes (a new random part per process, drawn
    again in a forked child) and never repeat within one (2**48 IDs before the counter wraps)."""

    def __init__(self) -> None:
        self.reseed()
        os.register_at_fork(after_in_child=self.reseed)

    def reseed(self) -> None:
        r = os.urandom(10).hex()  # 80 bits, 74 used (the version and variant digits are fixed)
        self._prefix = f"{r[:8]}-{r[8:12]}-4{r[12:15]}-{'89ab'[int(r[15], 16) & 3]}{r[16:19]}-"
        self._counter = itertools.count()

    def __call__(self) -> str:
        return f"{self._prefix}{next(self._counter) & 0xFFFFFFFFFFFF:012x}"


#: a new unique ID (events, commands, requests)
new_id = _IdSource()


def command(
    workflow_id: str,
    body_type: str,
    body: Mapping[str, Any],
    *,
    request_id: str | None = None,
    run_id: str | None = None,
    trace_id: str | None = None,
    span_id: str | None = None,
    expected_version: int | None = None,
    event_id: str | None = None,
) -> dict[str, Any]:
    """A ``Command`` envelope. ``request_id`` deduplicates retries of the same request;
    ``trace_id``/``span_id``: the OpenTelemetry context it continues (``topics.tracing``);
    ``event_id``: a new one unless given (an eager start names its run by it, ``start_run_id``)."""
    return {
        "event_id": event_id or new_id(),
        "aggregate_key": workflow_id,
        "timestamp_ms": now_ms(),
        "trace_id": trace_id,
        "request_id": request_id,
        "idempotency_key": request_id,
        "expected_version": expected_version,
        "run_id": run_id,
        "body": (body_type, body),
        "span_id": span_id,
    }


#: the UUID namespace of run IDs: uuid5 of a start's event ID, or of the run before and how it ended
RUN_NAMESPACE = uuid.UUID("6b1d6f0e-0c1e-4a52-9d3c-4b8e7f0b9a11")


def start_run_id(event_id: str) -> str:
    """The run ID a start creates: derived from its command's event ID, so a client that runs
    the first workflow task itself (an eager start) knows it before the engine records it."""
    return str(uuid.uuid5(RUN_NAMESPACE, event_id))


def history_key(workflow_id: str, run_id: str, seq: int) -> str:
    return f"{workflow_id}/{run_id}/{seq}"


def idempotency_key(workflow_id: str, run_id: str, activity_id: str) -> str:
    """The activity idempotency key, stable across attempts (docs/architecture.md, "Retries, timeouts and heartbeats")."""
    return f"{workflow_id}/{run_id}/{activity_id}"


def event_type(event: dict[str, Any]) -> str:
    name: str = event["attributes"][0]
    return name


def attrs(event: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = event["attributes"][1]
    return fields
