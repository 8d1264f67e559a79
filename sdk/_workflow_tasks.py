"""A worker's workflow tasks: each task from the workflow-task topic (or read again from the
history topic when the engine sent it without its events) applied to the run's cached
``WorkflowInstance`` or a new one over its whole history, its local activities run, and the
task completed or failed with the cause. Queries are ``_query_tasks``; eager workflow tasks
(decision 0031) and eager starts stay with the ``Worker``, which holds the instance cache."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, cast

from confluent_kafka import Message

from kadence.schemas.records import WorkflowTask
from kadence.topics import serde
from kadence.topics.errors import KadenceError, SchemaError
from kadence.topics.log_context import reset_log_fields, set_log_fields
from kadence.topics.records import new_id
from kadence.topics.tracing import record_ref

from ._definitions import WorkflowDefinition
from ._instance import HistoryGapError, WorkflowInfo, WorkflowInstance, task_failure_cause
from ._local_activities import run_local_activities, worker_local_activity
from ._task_consumer import TaskConsumer
from ._task_history import with_events_from_topic

if TYPE_CHECKING:
    from ._worker import Worker

__all__ = ["WorkflowTasks"]

log = logging.getLogger("kadence._worker")  # (the worker's lines, as before the split)


class WorkflowTasks:
    """The workflow side of one ``Worker`` (which it reads for the client, the registrations,
    the instance cache, the outbox and the metrics)."""

    def __init__(self, worker: Worker) -> None:
        self.w = worker

    def on_task(self, msg: Message) -> None:
        try:
            task = cast(WorkflowTask, serde.decode("WorkflowTask", msg.value()))
        except SchemaError as exc:
            log.error("undecodable workflow task at %s[%d]@%d: %s", msg.topic(), msg.partition(), msg.offset(), exc)
            self.w._live_wt_consumer.done(msg)
            return
        if task.get("history_in_topic"):
            # the engine sent the task without its events (too large for one record)
            t = asyncio.get_running_loop().create_task(self._with_history_from_topic(task, msg))
            self.w._running.add(t)
            t.add_done_callback(self.w._running.discard)
            return
        self._run_workflow_task(task, msg)

    async def _with_history_from_topic(self, task: WorkflowTask, msg: Message) -> None:
        """A task the engine sent without its events: read them (``_task_history``), then run it."""
        try:
            task = await with_events_from_topic(self.w.client.engine, task, self.w._cache.get(task["workflow_id"]))
        except Exception as exc:  # noqa: BLE001 - the task fails (the engine retries it later), the query is answered so
            log.warning(
                "workflow %s run %s: history of a task not readable: %s", task["workflow_id"], task["run_id"], exc
            )
            if task["query"] is not None:
                self.w._queries.answer(task, msg, unreadable=exc)
            else:
                self.fail(task, msg, "worker_error", exc)
            return
        self.w.stats["tasks_read_from_history"] += 1
        self._run_workflow_task(task, msg)

    def _run_workflow_task(self, task: WorkflowTask, msg: Message) -> None:
        fields = set_log_fields(task["workflow_id"], task["run_id"], msg.partition(), task.get("trace_id"))
        try:
            parent = record_ref(task)
            if parent is None:
                self._workflow_task(task, msg)
            else:  # traced: what the task sends continues from its span (``topics.tracing``)
                with self.w._tracer.child(
                    f"kadence.workflow_task {task['workflow_type']}", parent, self.w._span_attributes(task)
                ) as ref:
                    task["span_id"] = ref[1]
                    self._workflow_task(task, msg)
        except Exception:
            log.exception("workflow task of %s failed in the worker", task["workflow_id"])
            self.w._live_wt_consumer.done(msg)
        finally:
            reset_log_fields(fields)

    def _workflow_task(self, task: WorkflowTask, msg: Message) -> None:
        if task["query"] is not None:
            self.w._queries.take(task, msg)
            return
        seq = task["scheduled_seq"]
        consumer = self.w._live_wt_consumer
        defn = self.w._workflows.get(task["workflow_type"])
        if defn is None:
            self.w.metrics.workflow_task(task["workflow_type"], "failed")
            self.fail(
                task,
                msg,
                "unknown_workflow_type",
                KadenceError(
                    f"workflow type {task['workflow_type']!r} is not registered on worker {self.w.identity} "
                    f"(task queue {self.w.task_queue})"
                ),
            )
            return
        inst = self._instance_for(task, msg, defn, consumer)
        if inst is None:
            return
        began = time.perf_counter()
        try:
            commands = inst.apply(task["events"], seq)
            if inst.last_seq != seq:
                raise HistoryGapError(f"task ends at event {inst.last_seq}, expected {seq}")
        except HistoryGapError:
            inst.discard()
            self._request_history(task, msg, defn, consumer)
            return
        except Exception as exc:  # noqa: BLE001 - an SDK or loop error fails the task, not the worker
            self._code_failed(task, msg, inst, defn, began, exc)
            return
        if inst.pending_local_activities():
            # run them, then complete the task (the instance stays out of the cache meanwhile:
            # no eager task or other task of this workflow uses it half-way)
            t = asyncio.get_running_loop().create_task(self._with_local_activities(task, msg, inst, defn, began))
            self.w._running.add(t)
            t.add_done_callback(self.w._running.discard)
            return
        self._complete_workflow_task(task, msg, inst, defn, began, commands)

    def _instance_for(
        self, task: WorkflowTask, msg: Message, defn: WorkflowDefinition, consumer: TaskConsumer
    ) -> WorkflowInstance | None:
        """The instance to apply ``task`` to: the cached one if it is this run's and up to the
        task, a new one for a full history; None when the task is answered here instead (a stale
        one, or a partial one with nothing cached: its history is asked for)."""
        wf, run_id, seq = task["workflow_id"], task["run_id"], task["scheduled_seq"]
        inst = self.w._cache.pop(wf, None)
        if inst is not None and inst.info.run_id != run_id:
            inst.discard()
            inst = None
        if inst is not None and inst.eager_token is not None:
            # it ran an eager workflow task: usable only if the engine recorded it, which this
            # task's first event says (else the instance ran ahead on a history that did not happen)
            if task["full_history"] or not task["events"] or not inst.confirm_eager(task["events"][0]):
                self.w.stats["eager_discarded"] += 1
                inst.discard()
                inst = None
        if inst is not None and inst.last_seq >= seq:
            self.w._cache[wf] = inst  # a redelivered task we already answered
            self.w.stats["stale_tasks"] += 1
            self.w.metrics.workflow_task(defn.name, "stale")
            consumer.done(msg)
            return None
        if task["full_history"]:
            if inst is not None:
                inst.discard()
            return WorkflowInstance(
                defn,
                WorkflowInfo(wf, run_id, task["workflow_type"], task["task_queue"], task["attempt"]),
                self.w.client.converter,
                self.w.interceptors,
                self.w._failure_types,
            )
        if inst is None:
            self._request_history(task, msg, defn, consumer)
        return inst

    def _request_history(
        self, task: WorkflowTask, msg: Message, defn: WorkflowDefinition, consumer: TaskConsumer
    ) -> None:
        """Ask the engine for the run's whole history (the task will come again with it)."""
        self.w.stats["history_requests"] += 1
        self.w.metrics.workflow_task(defn.name, "history_requested")
        self.w._send(
            task,
            "RequestWorkflowHistory",
            {"scheduled_seq": task["scheduled_seq"], "identity": self.w.identity, "build_id": self.w.build_id},
            msg,
            consumer,
        )

    def _code_failed(
        self,
        task: WorkflowTask,
        msg: Message,
        inst: WorkflowInstance,
        defn: WorkflowDefinition,
        began: float,
        exc: Exception,
    ) -> None:
        """The workflow's code (or the SDK running it) raised while running a task: drop the
        instance and fail the task with the cause (call from the ``except`` block)."""
        inst.discard()
        cause = task_failure_cause(exc)
        if cause in ("worker_error", "workflow_error"):
            self.w.metrics.workflow_task(defn.name, "failed", time.perf_counter() - began)
            log.exception(
                "workflow %s run %s: workflow task attempt %d failed (%s); the run stays open until fixed code runs it",
                task["workflow_id"],
                task["run_id"],
                task["attempt"],
                type(exc).__name__,
            )
        else:
            self.w.stats["non_determinism"] += 1
            self.w.metrics.workflow_task(defn.name, "non_determinism", time.perf_counter() - began)
            log.error("workflow %s run %s: %s", task["workflow_id"], task["run_id"], exc)
        self.fail(task, msg, cause, exc)

    def _complete_workflow_task(
        self,
        task: WorkflowTask,
        msg: Message,
        inst: WorkflowInstance,
        defn: WorkflowDefinition,
        began: float,
        commands: list[Any],
    ) -> None:
        wf = task["workflow_id"]
        self.w.stats["workflow_tasks"] += 1
        self.w.metrics.workflow_task(defn.name, "completed", time.perf_counter() - began)
        request_id = new_id()
        commands = self.w._eager_activities.ask(wf, request_id, commands)
        self.w._send(
            task,
            "RespondWorkflowTaskCompleted",
            {
                "scheduled_seq": task["scheduled_seq"],
                "commands": commands,
                "identity": self.w.identity,
                "build_id": self.w.build_id,
            },
            msg,
            self.w._live_wt_consumer,
            request_id,
        )
        self.w._keep(wf, inst)

    # -- local activities (decision 0043) --------------------------------------------------------

    async def _with_local_activities(
        self, task: WorkflowTask, msg: Message, inst: WorkflowInstance, defn: WorkflowDefinition, began: float
    ) -> None:
        """Run the local activities the workflow waits for, let it go on, and again, until it
        waits for something else; then complete the workflow task with their markers."""
        wf, run_id = task["workflow_id"], task["run_id"]
        fields = set_log_fields(wf, run_id, msg.partition(), task.get("trace_id"))
        try:
            await run_local_activities(inst, lambda call: worker_local_activity(self.w, task, call, inst.info.headers))
        except asyncio.CancelledError:
            inst.discard()  # worker stopping: the task is redelivered and runs them again
            raise
        except Exception as exc:  # noqa: BLE001 - an SDK or loop error fails the task, not the worker
            self._code_failed(task, msg, inst, defn, began, exc)
            return
        finally:
            reset_log_fields(fields)
        self._complete_workflow_task(task, msg, inst, defn, began, inst.commands())

    def fail(self, task: WorkflowTask, msg: Message, cause: str, exc: BaseException) -> None:
        self.w._send(
            task,
            "RespondWorkflowTaskFailed",
            {
                "scheduled_seq": task["scheduled_seq"],
                "cause": cause,
                "failure": self.w.client.converter.failure(exc),
                "identity": self.w.identity,
                "build_id": self.w.build_id,
            },
            msg,
            self.w._live_wt_consumer,
        )
