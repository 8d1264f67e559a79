"""A deterministic asyncio event loop for workflow code.

Workflow coroutines run on this loop, never on the worker's real loop. It has no I/O, no threads
and no wall clock: ``time()`` is the history's time of the current workflow task, the ready queue
is drained in FIFO order until nothing is runnable, and anything that would make a run depend on
the outside world (real timers, threads, sockets, subprocesses) raises a clear error instead.
Standard helpers (``asyncio.gather``, tasks, futures, locks, events) work unchanged.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import logging
import sys
import threading
import time
import weakref
from collections.abc import Callable, Coroutine, Generator, Iterator
from typing import TYPE_CHECKING, Any, NoReturn, SupportsIndex, TypeVarTuple, Unpack

from kadence.topics.errors import NotDeterministicError

if TYPE_CHECKING:
    from ._instance import WorkflowInstance

__all__ = ["DeterministicLoop", "DurableTimerHandle", "NotDeterministicError", "install_guard"]

log = logging.getLogger(__name__)

#: set while workflow code runs on a deterministic loop in this thread
_active = threading.local()

#: audit events (PEP 578) that workflow code must not cause, and what to use instead
_FORBIDDEN = {
    "time.sleep": "await workflow.sleep()",
    "socket.connect": "an activity",
    "socket.getaddrinfo": "an activity",
    "subprocess.Popen": "an activity",
    "os.system": "an activity",
    "urllib.Request": "an activity",
}
_guard_installed = False
_Ts = TypeVarTuple("_Ts")


def _audit(event: str, _args: tuple[Any, ...]) -> None:
    if event in _FORBIDDEN and getattr(_active, "on", False):
        _active.on = False  # the error's own machinery must not trip the guard again
        raise NotDeterministicError(
            f"workflow code caused {event!r}, which is not replay-safe; use {_FORBIDDEN[event]} instead"
        )


def install_guard() -> None:
    """Make blocking sleeps, sockets and subprocesses in workflow code fail loudly (a process-wide
    audit hook that only acts while workflow code runs in the calling thread)."""
    global _guard_installed
    if not _guard_installed:
        sys.addaudithook(_audit)
        # Python 3.11 has no audit event for time.sleep: wrap it (callers that bound it with
        # `from time import sleep` before this keep the original)
        original = time.sleep

        def sleep(seconds: float | SupportsIndex) -> None:
            if getattr(_active, "on", False):
                _audit("time.sleep", (seconds,))
            return original(seconds)

        time.sleep = sleep
        _guard_installed = True


def _refuse(what: str, instead: str) -> Any:  # stands in for methods of every signature
    def method(self: object, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotDeterministicError(f"workflow code called {what}, which is not deterministic; use {instead} instead")

    method.__name__ = what
    return method


class DeterministicLoop(asyncio.AbstractEventLoop):
    def __init__(self, owner: WorkflowInstance | None = None) -> None:
        self._ready: collections.deque[Any] = collections.deque()
        self._time = 0.0
        self._closed = False
        self.owner = owner
        #: exceptions raised by callbacks (not by tasks, which keep theirs)
        self.errors: list[BaseException] = []
        #: this loop's tasks (``asyncio.all_tasks(loop)`` walks every task of the process: with
        #: hundreds of workflows cached that was a seventh of a busy worker's CPU)
        self._tasks: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()

    # -- the parts workflow code uses ----------------------------------------------------------

    def time(self) -> float:
        return self._time

    def set_time(self, seconds: float) -> None:
        self._time = seconds

    def call_soon(
        self, callback: Callable[[Unpack[_Ts]], object], *args: *_Ts, context: contextvars.Context | None = None
    ) -> asyncio.Handle:
        handle = asyncio.Handle(callback, args, self, context)
        self._ready.append(handle)
        return handle

    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.Future(loop=self)

    def create_task(
        self,
        coro: Coroutine[Any, Any, Any] | Generator[Any, None, Any],
        *,
        name: str | None = None,
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=self, name=name, context=context)
        self._tasks.add(task)
        return task

    def tasks(self) -> list[asyncio.Task[Any]]:
        """The tasks created on this loop that are not done."""
        return [t for t in self._tasks if not t.done()]

    def get_debug(self) -> bool:
        return False

    def is_running(self) -> bool:
        return True

    def is_closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._ready.clear()
        self._closed = True

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if exc is not None:
            self.errors.append(exc)
        log.debug("workflow loop: %s", context.get("message"))

    def default_exception_handler(self, context: dict[str, Any]) -> None:
        self.call_exception_handler(context)

    def get_exception_handler(self) -> None:
        return None

    def _timer_handle_cancelled(self, handle: asyncio.TimerHandle) -> None:
        """asyncio calls this when a TimerHandle is cancelled; our timers cancel themselves."""

    # -- driving it ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Workflow code runs in here: this loop is the running one (``workflow.*`` finds its
        instance) and the guard against what is not replay-safe is on."""
        previous = asyncio.events._get_running_loop()
        asyncio.events._set_running_loop(self)
        _active.on = True
        try:
            yield
        finally:
            _active.on = False
            asyncio.events._set_running_loop(previous)

    def run_until_idle(self) -> None:
        """Run every ready callback, and those they schedule, until none is left."""
        with self.active():
            while self._ready:
                handle = self._ready.popleft()
                if not handle._cancelled:
                    handle._run()

    # -- refused: not replay-safe --------------------------------------------------------------

    def call_later(
        self,
        delay: float,
        callback: Callable[[Unpack[_Ts]], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        """A durable timer: recorded in history, fired by the engine's timer service."""
        if self.owner is None:
            raise NotDeterministicError("timers need a workflow instance")
        return self.owner.start_timer(delay, callback, args)

    def call_at(
        self,
        when: float,
        callback: Callable[[Unpack[_Ts]], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        return self.call_later(max(0.0, when - self._time), callback, *args, context=context)

    call_soon_threadsafe = _refuse("loop.call_soon_threadsafe (threads)", "an activity")
    run_in_executor = _refuse("loop.run_in_executor (threads)", "an activity")
    getaddrinfo = _refuse("getaddrinfo (network I/O)", "an activity")
    create_connection = _refuse("loop.create_connection (network I/O)", "an activity")
    create_server = _refuse("loop.create_server (network I/O)", "an activity")
    subprocess_exec = _refuse("a subprocess", "an activity")
    subprocess_shell = _refuse("a subprocess", "an activity")
    sock_connect = _refuse("socket I/O", "an activity")
    add_reader = _refuse("file descriptor I/O", "an activity")
    add_writer = _refuse("file descriptor I/O", "an activity")
    run_until_complete = _refuse("loop.run_until_complete", "await")
    run_forever = _refuse("loop.run_forever", "await")


class DurableTimerHandle(asyncio.TimerHandle):
    """``loop.call_later`` on the workflow loop: a durable timer in the engine, fired when its
    ``TimerFired`` event is read. ``cancel`` records the cancel (a ``CancelTimer`` command, through
    the instance's ``cancel(timer_id)``); ``cancel_silently`` drops it without one (the run is over)."""

    def __init__(
        self,
        loop: DeterministicLoop,
        timer_id: str,
        callback: Callable[..., object],
        args: tuple[Any, ...],
        *,
        cancel: Callable[[str], None],
        drop: Callable[[str], object],
    ) -> None:
        super().__init__(0.0, callback, args, loop)
        self._workflow_loop = loop
        self._record_cancel, self._drop = cancel, drop
        self.timer_id = timer_id

    def fire(self) -> None:
        if not self._cancelled:
            self._workflow_loop._ready.append(self)

    def cancel(self) -> None:
        if not self._cancelled:
            self._record_cancel(self.timer_id)
        super().cancel()

    def cancel_silently(self) -> None:
        self._drop(self.timer_id)
        asyncio.Handle.cancel(self)
