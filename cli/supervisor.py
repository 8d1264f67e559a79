"""Child processes that are restarted when they exit: what ``kadence dev`` runs its processor,
timer service and gateway under.

A processor exits on purpose when librdkafka leaves it stuck (status 75, docs/deploy.md) and
expects its supervisor to start it again; in production that is systemd or Kubernetes, in
development it is this. A child that exits is started again after a delay that doubles from
``first_delay_s`` up to ``max_delay_s`` and goes back to the first once the child has stayed up
for ``stable_s``. Each exit and restart is printed as one line.
"""

from __future__ import annotations

import collections
import ctypes
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Child", "Supervisor"]

#: exit statuses a child keeps
EXITS_KEPT = 100


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """SIGKILL the child when the supervisor dies (Linux ``PR_SET_PDEATHSIG``): an orphan would keep
    the slot's group membership and transactional ID and fight its replacement. SIGKILL, not SIGTERM: a
    supervisor killed hard stands for a crash of the whole component, and its child crashes with it
    (nothing it holds is lost: every component commits before it acknowledges)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: orphans are left to the operator
        pass


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None
    #: how many times it was started again after an exit
    restarts: int = 0
    started_at: float = 0.0
    delay_s: float = 0.0
    #: monotonic time of the next start, while it is down
    restart_at: float | None = None
    #: the statuses of its last exits, newest last (bounded: a child that keeps exiting for days)
    exits: collections.deque[Any] = field(default_factory=lambda: collections.deque(maxlen=EXITS_KEPT))
    #: set when it exited with one of the supervisor's ``final_statuses``: it is not started again
    given_up: bool = False


class Supervisor:
    """Start children, restart them when they exit, stop them all on ``stop()``. Thread-safe."""

    def __init__(
        self,
        *,
        first_delay_s: float = 1.0,
        max_delay_s: float = 30.0,
        stable_s: float = 60.0,
        check_every_s: float = 0.5,
        echo: Callable[[str], None] = print,
        final_statuses: frozenset[int] = frozenset(),
    ) -> None:
        self.first_delay_s, self.max_delay_s, self.stable_s = first_delay_s, max_delay_s, stable_s
        #: exit statuses that mean "a setting to fix" (restarting would fail the same way): a
        #: child that exits with one is left stopped, ``given_up``
        self.final_statuses = final_statuses
        self.check_every_s = check_every_s
        self.echo = echo
        self.children: dict[str, Child] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Child:
        child = Child(name, list(argv), env, delay_s=self.first_delay_s)
        with self._lock:
            if name in self.children:
                raise ValueError(f"a child named {name!r} is already supervised")
            self.children[name] = child
            self._launch(child)
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="kadence-supervisor", daemon=True)
            self._thread.start()
        return child

    def _launch(self, child: Child) -> None:
        child.proc = subprocess.Popen(child.argv, env=child.env, preexec_fn=_die_with_parent)
        child.started_at = time.monotonic()
        child.restart_at = None

    def check(self) -> None:
        """One pass: note children that exited, start those whose delay has passed."""
        now = time.monotonic()
        with self._lock:
            if self._stopping.is_set():
                return
            for child in self.children.values():
                if child.given_up:
                    continue
                if child.restart_at is None and child.proc is not None and child.proc.poll() is not None:
                    status = child.proc.returncode
                    child.exits.append(status)
                    if status in self.final_statuses:
                        child.given_up = True
                        self.echo(
                            f"==> {child.name} exited with status {status}: a setting to fix; not starting it again"
                        )
                        continue
                    if now - child.started_at >= self.stable_s:
                        child.delay_s = self.first_delay_s
                    child.restart_at = now + child.delay_s
                    self.echo(
                        f"==> {child.name} exited with status {status}; starting it again in {child.delay_s:.1f} s"
                    )
                    child.delay_s = min(self.max_delay_s, child.delay_s * 2)
                elif child.restart_at is not None and now >= child.restart_at:
                    child.restarts += 1
                    self._launch(child)
                    self.echo(f"==> {child.name} started again (restart {child.restarts})")

    def _watch(self) -> None:
        while not self._stopping.wait(self.check_every_s):
            self.check()

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM every child, SIGKILL what is still running after ``timeout``; no restarts after."""
        self._stopping.set()
        with self._lock:
            procs = [c.proc for c in self.children.values() if c.proc is not None]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._thread is not None:
            self._thread.join(2)
