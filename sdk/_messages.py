"""What a running workflow instance does with messages (``_instance.WorkflowInstance`` inherits
it): queries answered on the current state, updates validated and run as tasks of the workflow
(their outcome a ``CompleteWorkflowUpdate`` command), signals delivered to their handlers, every
handler called through the interceptors, and the async handlers still running tracked for
``workflow.all_handlers_finished``."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from kadence.topics.errors import ApplicationError, KadenceError, PayloadTypeError
from kadence.topics.payload import PayloadConverter

from ._definitions import WorkflowDefinition
from .interceptors import Interceptor, WorkflowCall, chain

if TYPE_CHECKING:
    import collections

    from ._instance import WorkflowInfo
    from ._loop import DeterministicLoop

__all__ = ["WorkflowMessages"]

log = logging.getLogger("kadence._instance")
_T = TypeVar("_T")


class WorkflowMessages:
    """Queries, updates and signals of one workflow instance (a mixin of ``WorkflowInstance``,
    whose ``__init__`` sets the attributes declared here)."""

    defn: WorkflowDefinition
    info: WorkflowInfo
    converter: PayloadConverter
    interceptors: Iterable[Interceptor]
    loop: DeterministicLoop
    closed: bool
    failure_types: tuple[type[BaseException], ...]
    _obj: Any
    _unmatched: collections.deque[Any]
    _handlers: set[asyncio.Task[Any]]

    @property
    def silent(self) -> bool:  # pragma: no cover - WorkflowInstance's
        raise NotImplementedError

    def _handle(self, kind: str, name: str, handler: Callable[..., Any], args: list[Any]) -> Any:
        """``handler(self._obj, *args)`` through the interceptors' ``intercept_workflow``."""
        inner = lambda call: handler(self._obj, *call.args)  # noqa: E731 - the chain's innermost
        return chain(self.interceptors, "intercept_workflow", inner)(WorkflowCall(kind, self.info, name, list(args)))

    def query(self, name: str, data: bytes | None) -> Any:
        """Answer a query; ``data``: its encoded arguments, typed by the handler's hints."""
        handler = self.defn.queries.get(name)
        if handler is None:
            known = ", ".join(sorted(self.defn.queries)) or "none"
            raise KeyError(f"workflow {self.info.workflow_type} has no query {name!r} (known: {known})")
        if self._obj is None:
            raise RuntimeError("the workflow has not started yet")
        return self._handle(
            "query",
            name,
            handler,
            self.converter.args_from_bytes(
                data, handler, method=True, what=f"query {name!r} of workflow {self.info.workflow_type}"
            ),
        )

    def validate_update(self, name: str, data: bytes | None) -> None:
        """Run an update's validator on the current state (raises to reject it): the handler
        must exist, the arguments match its hints, and the validator, if any, not raise."""
        handler = self.defn.updates.get(name)
        if handler is None:
            known = ", ".join(sorted(self.defn.updates)) or "none"
            raise ApplicationError(
                f"workflow {self.info.workflow_type} has no update {name!r} (known: {known})",
                type="UnknownUpdate",
                non_retryable=True,
            )
        if self._obj is None:
            raise RuntimeError("the workflow has not started yet")
        args = self.converter.args_from_bytes(
            data, handler, method=True, what=f"update {name!r} of workflow {self.info.workflow_type}"
        )
        validator = getattr(handler, "__kadence_update_validator__", None)
        if validator is not None:
            self._handle("validator", name, validator, args)

    def _deliver_update(self, attrs: dict[str, Any]) -> None:
        """An accepted update: its handler runs as a task of the workflow; its outcome is the
        ``CompleteWorkflowUpdate`` command of the workflow task it finishes in."""
        name, update_id = attrs["update_name"], attrs["update_id"]
        handler = self.defn.updates.get(name)

        async def run() -> Any:
            if handler is None:
                raise ApplicationError(
                    f"workflow {self.info.workflow_type} has no update {name!r}",
                    type="UnknownUpdate",
                    non_retryable=True,
                )
            args = self.converter.args_from_bytes(
                attrs["input"], handler, method=True, what=f"update {name!r} of workflow {self.info.workflow_type}"
            )
            result = self._handle("update", name, handler, args)
            return (await result) if inspect.isawaitable(result) else result

        task = self.loop.create_task(run(), name=f"update:{name}")
        self._track_handler(task)
        task.add_done_callback(lambda t: self._on_update_done(update_id, t))

    def _on_update_done(self, update_id: str, task: asyncio.Task[Any]) -> None:
        if self.closed:
            # the run's close came first: nothing follows a close (the engine fails the update),
            # and a command here would not match the history on replay
            return
        if task.cancelled():
            exc: BaseException | None = ApplicationError("the update was cancelled", type="CancelledError")
        else:
            exc = task.exception()
        if exc is not None and not isinstance(exc, self.failure_types):
            self.loop.errors.append(exc)  # a bug, or a payload this worker cannot read: fail the task
            return
        result = failure = None
        if exc is None:
            try:
                result = self.converter.to_bytes(task.result())
            except KadenceError as err:  # a result that cannot travel: the update fails
                failure = self.converter.failure(err)
        else:
            failure = self.converter.failure(exc)
        self._unmatched.append(
            ("CompleteWorkflowUpdate", {"update_id": update_id, "result": result, "failure": failure})
        )

    def _deliver_signal(self, attrs: dict[str, Any]) -> None:
        handler = self.defn.signals.get(attrs["signal_name"])
        if handler is None or self._obj is None:
            if self.silent:
                return
            log.warning(
                "workflow %s (%s): no handler for signal %r; dropped",
                self.info.workflow_type,
                self.info.workflow_id,
                attrs["signal_name"],
            )
            return
        try:
            args = self.converter.args_from_bytes(
                attrs["input"],
                handler,
                method=True,
                what=f"signal {attrs['signal_name']!r} of workflow {self.info.workflow_type}",
            )
        except PayloadTypeError as exc:  # as Temporal does: the signal is dropped, the run goes on
            if self.silent:
                return
            log.warning(
                "workflow %s (%s): signal %r dropped: %s",
                self.info.workflow_type,
                self.info.workflow_id,
                attrs["signal_name"],
                exc,
            )
            return
        result = self._handle("signal", attrs["signal_name"], handler, args)
        if inspect.isawaitable(result):
            self._track_handler(self.loop.create_task(_awaited(result), name=f"signal:{attrs['signal_name']}"))

    def _track_handler(self, task: asyncio.Task[Any]) -> None:
        """An async signal or update handler running (``all_handlers_finished``)."""
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)

    def all_handlers_finished(self) -> bool:
        """Whether no async signal or update handler is still running."""
        return not self._handlers


async def _awaited(awaitable: Awaitable[_T]) -> _T:
    return await awaitable
