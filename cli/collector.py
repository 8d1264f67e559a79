"""The garbage collector's policy for the long-running engine processes (``kadence processor``,
``kadence timers``, ``kadence worker``, ``kadence schedules worker``, ``kadence batch worker``).

These processes hold a large heap that lives as long as they do: a processor's shard state, a
worker's cached workflow instances (10,000 schedules: 840,000 tracked objects in the schedules
worker). CPython's collector walks all of it in a *full* collection, started whenever the
objects promoted to the oldest generation since the last one exceed a quarter of it, which for
these processes is every minute or so. Measured in the ``schedules`` bench (docs/performance.md,
session 65): every full collection of the schedules worker and the processor during the
measurement freed **0** objects, and paused the process 0.6-0.8 s on the loaded machine; the
schedules whose times fell in the pause made the whole p99 tail of the lateness.

So the young generations are collected as CPython does (they are where the short-lived cycles
die), the objects alive at start (modules, functions, classes: forever) are frozen out of every
later pass, and the full collection runs on a clock, every ``KADENCE_GC_FULL_EVERY_S`` (600 s),
instead of on the promotion count: what becomes cyclic garbage after being promoted waits at
most that long to be freed. ``0`` keeps CPython's own policy. No library does this (the knobs
are ``gc``'s own); the gateway, whose heap is mostly the app it built at start, only freezes.
"""

from __future__ import annotations

import atexit
import gc
import logging
import threading
import time
from dataclasses import dataclass

import click

from kadence.topics.errors import ConfigError, KadenceError
from kadence.topics.settings import from_env, setting

__all__ = ["CollectorSettings", "FullPasses", "tune_collector", "tune_collector_from_env"]

log = logging.getLogger("kadence.collector")

#: a threshold for the oldest generation that the count never reaches: no full collection
#: starts on its own (CPython 3.11 counts young collections against it)
_NEVER = 2**31 - 1


@dataclass(frozen=True)
class CollectorSettings:
    full_every_s: float = setting(
        600.0,
        env="KADENCE_GC_FULL_EVERY_S",
        help="seconds between the collector's full passes in the engine's processes (0: CPython's own policy)",
    )

    def __post_init__(self) -> None:
        if not self.full_every_s >= 0:
            raise ConfigError(f"KADENCE_GC_FULL_EVERY_S must be 0 or more, not {self.full_every_s!r}")


class FullPasses:
    """The clock of full collections: a daemon thread that runs ``gc.collect()`` every
    ``every_s`` seconds and logs how long each took and what it freed."""

    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self.passes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kadence-gc-full", daemon=True)

    def start(self) -> FullPasses:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            t0 = time.perf_counter()
            freed = gc.collect()
            self.passes += 1
            log.info("collector: full pass in %.0f ms, %d objects freed", (time.perf_counter() - t0) * 1000, freed)


def tune_collector(settings: CollectorSettings) -> FullPasses | None:
    """Apply the policy (above) to this process; the clock of full passes, or None when
    ``full_every_s`` is 0 (CPython's policy, untouched)."""
    if settings.full_every_s == 0:
        return None
    gc.collect()
    gc.freeze()  # what exists now lives as long as the process: out of every later pass
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, _NEVER)
    # one full pass when the process exits, while the interpreter is whole: a cycle left
    # uncollected by the clock (a service that failed to start, its Kafka clients held by the
    # exception's traceback) would otherwise be destroyed during finalization, where a client's
    # destructor meets librdkafka's threads calling back into Python (a processor refused by the
    # brokers exited with SIGSEGV after its error message, in CI)
    atexit.register(gc.collect)
    return FullPasses(settings.full_every_s).start()


def tune_collector_from_env() -> FullPasses | None:
    """``tune_collector`` with the settings of the environment (a value that does not parse is a
    usage error naming its variable): called by each engine command once its code is loaded."""
    try:
        settings = from_env(CollectorSettings)
    except KadenceError as exc:
        raise click.UsageError(str(exc)) from exc
    return tune_collector(settings)
