"""The fault injector: every component of a chaos run as a process it can kill, pause and restart.

Processors and the timer service are ``kadence`` CLI subprocesses (``ProcessorProcs`` from the
integration fixtures); workers are ``worker_main`` subprocesses; the broker is the test's own
``devstack.KafkaBroker``. ``run_faults`` executes a planned, seeded sequence of faults.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from kadence.processors.history_processor import EXIT_TXN_STALLED
from kadence.topics import KafkaConfig
from tests.integration.conftest import ProcessorProcs
from tests.integration.projection_support import ProjectionProcs

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[3]
PROCESSORS = ("p0", "p1")
WORKERS = ("w0", "w1")
#: the processors' session timeout (ProcessorProcs sets KADENCE_SESSION_TIMEOUT_MS=6000); a pause
#: longer than this makes the group move the paused instance's partitions
SESSION_TIMEOUT_S = 6.0
#: SIGSTOP lengths: shorter and longer than the session timeout (issue 15); the first pause of a
#: run always outlasts it, so every run makes the group move a paused instance's partitions
PAUSE_RANGE_S = (1.0, 15.0)
FIRST_PAUSE_S = (SESSION_TIMEOUT_S + 1.0, 15.0)

#: faults every run does at least this often (the acceptance floor of issue #7)
MINIMUM_FAULTS = {
    "kill_processor": 5,
    "kill_worker": 5,
    "restart_broker": 1,
    "kill_timers": 1,
    "pause_processor": 1,
    "kill_projection": 2,
}
#: extra faults a longer run draws from, with weights
EXTRA_FAULTS = {
    "kill_processor": 4,
    "kill_worker": 4,
    "kill_timers": 2,
    "pause_processor": 3,
    "restart_broker": 1,
    "kill_projection": 2,
    "pause_worker": 2,
}


def plan_faults(rng: random.Random, seconds: float, more: dict[str, int] | None = None) -> list[str]:
    """The minimum set (and ``more``: a replicated cluster's faults, each that often), plus one
    extra fault per ~12 s beyond the first 80 s, shuffled."""
    plan = [f for f, n in {**MINIMUM_FAULTS, **(more or {})}.items() for _ in range(n)]
    extra = max(0, int((seconds - 80) / 12))
    names = [f for f, w in EXTRA_FAULTS.items() if w]
    plan += rng.choices(names, weights=[EXTRA_FAULTS[f] for f in names], k=extra)
    rng.shuffle(plan)
    return plan


class Cluster:
    def __init__(self, broker, config: KafkaConfig, logdir: Path, *, redis_url: str, prefix: str, rng: random.Random):
        self.broker = broker
        self.config = config
        self.logdir = logdir
        self.redis_url = redis_url
        self.prefix = prefix
        self.rng = rng
        self.procs = ProcessorProcs(config, logdir)
        self.projection = ProjectionProcs(config, logdir)
        self.workers: dict[str, subprocess.Popen] = {}
        self._worker_starts = 0
        self.counts: collections.Counter = collections.Counter()
        #: components found dead that no fault killed: (name, exit code)
        self.unexpected_exits: list[tuple[str, int]] = []
        self.fault_log: list[str] = []
        #: the faults as run, for the campaign's result file
        self.faults: list[dict] = []

    # -- processes -----------------------------------------------------------------------------

    def start(self) -> None:
        for p in PROCESSORS:
            self.procs.start(p)
        self.procs.start_timers()
        for w in WORKERS:
            self.start_worker(w)
        self.projection.start()

    def start_worker(self, name: str) -> None:
        self._worker_starts += 1
        logfile = open(self.logdir / f"worker-{name}-{self._worker_starts}.log", "w")
        env = {
            **os.environ,
            "KADENCE_KAFKA_BOOTSTRAP": self.config.bootstrap,
            "KADENCE_NAMESPACE": self.config.namespace,
            "KADENCE_REDIS_URL": self.redis_url,
            "KADENCE_CHAOS_PREFIX": self.prefix,
            "KADENCE_WORKER_ID": f"{name}-{self._worker_starts}",
            "KADENCE_WORKER_SESSION_TIMEOUT_MS": str(int(SESSION_TIMEOUT_S * 1000)),
        }
        self.workers[name] = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.chaos.worker_main"],
            env=env,
            cwd=ROOT,
            stdout=logfile,
            stderr=subprocess.STDOUT,
        )

    def _exited_on_fatal_kafka_error(self, name: str) -> bool:
        """Did the component end itself on a fatal Kafka client error (its designed way out:
        exit and be restarted)? Read from the tail of its latest log."""
        kind, _, slot = name.rpartition(":")
        logs = sorted(self.logdir.glob(f"{kind or 'processor'}-{slot}-*.log"), key=lambda p: p.stat().st_mtime)
        tail = logs[-1].read_text(errors="replace")[-3000:] if logs else ""
        return "KafkaException" in tail and "Fatal error" in tail

    def check_alive(self) -> None:
        """Restart any component that died without being killed, and remember it."""
        for name, proc in list(self.procs.procs.items()):
            if proc.poll() is not None:
                if proc.returncode == EXIT_TXN_STALLED:  # the engine's own way out of a hung transaction
                    self.counts["processor_stall_exits"] += 1
                elif self._exited_on_fatal_kafka_error(name):
                    self.counts["fatal_kafka_error_exits"] += 1
                    self.fault_log.append(f"  (component {name} exited on a fatal Kafka error and was restarted)")
                else:
                    self.unexpected_exits.append((name, proc.returncode))
                del self.procs.procs[name]
                if name.startswith("timers:"):
                    self.procs.start_timers(name.split(":", 1)[1])
                else:
                    self.procs.start(name)
        for name, proc in list(self.workers.items()):
            if proc.poll() is not None:
                self.unexpected_exits.append((f"worker:{name}", proc.returncode))
                self.start_worker(name)
        for name, proc in list(self.projection.procs.items()):
            if proc.poll() is not None:
                self.unexpected_exits.append((f"projection:{name}", proc.returncode))
                del self.projection.procs[name]
                self.projection.start(name)

    def dump_stacks(self) -> None:
        """Every live worker, processor and timer service writes its threads' stacks into its log
        (SIGUSR1 is registered with faulthandler by worker_main and `kadence processor/timers`):
        what a component that stopped making progress was doing."""
        for proc in [*self.workers.values(), *self.procs.procs.values()]:
            if proc.poll() is None:
                proc.send_signal(signal.SIGUSR1)

    def close(self) -> None:
        for proc in [*self.procs.procs.values(), *self.workers.values()]:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
        self.procs.close()
        self.projection.close()
        for proc in self.workers.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.workers.clear()

    def logs(self, tail: int = 3000) -> str:
        out = []
        for path in sorted(self.logdir.glob("*.log")):
            text = path.read_text(errors="replace")
            if "Traceback" in text or "ERROR" in text or path.name.startswith("processor"):
                out.append(f"--- {path.name}\n{text[-tail:]}")
        return "\n".join(out)

    # -- faults --------------------------------------------------------------------------------

    async def kill_processor(self) -> None:
        name = self.rng.choice(PROCESSORS)
        self.procs.kill(name)
        self.procs.start(name)
        self.counts["processor_kills"] += 1

    async def kill_worker(self) -> None:
        name = self.rng.choice(WORKERS)
        proc = self.workers.pop(name)
        proc.kill()
        proc.wait(10)
        self.start_worker(name)
        self.counts["worker_kills"] += 1

    async def kill_timers(self) -> None:
        self.procs.kill_timers()
        self.procs.start_timers()
        self.counts["timer_service_kills"] += 1

    def _pause_length(self, what: str) -> float:
        span = FIRST_PAUSE_S if not self.counts[what] else PAUSE_RANGE_S
        return self.rng.uniform(*span)

    async def _pause(self, proc: subprocess.Popen, seconds: float) -> None:
        proc.send_signal(signal.SIGSTOP)
        try:
            await asyncio.sleep(seconds)
        finally:
            proc.send_signal(signal.SIGCONT)

    async def pause_processor(self) -> str:
        """SIGSTOP a processor for 1-15 s: past its session timeout the group gives its partitions
        to the other one, and after SIGCONT whatever it had in hand (a buffered batch, a due
        deadline, an open transaction) must be refused, nothing duplicated."""
        name = self.rng.choice(PROCESSORS)
        seconds = self._pause_length("processor_pauses")
        await self._pause(self.procs.procs[name], seconds)
        self.counts["processor_pauses"] += 1
        return name

    async def pause_worker(self) -> str:
        """SIGSTOP a worker for 1-15 s: its tasks move to the other worker; its late completions
        and eager workflow tasks must be refused as stale."""
        name = self.rng.choice(WORKERS)
        seconds = self._pause_length("worker_pauses")
        await self._pause(self.workers[name], seconds)
        self.counts["worker_pauses"] += 1
        return name

    async def restart_broker(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.broker.restart)
        self.counts["broker_restarts"] += 1

    # -- a replicated cluster's faults (``tests/faults/chaos/brokers.ClusterBrokers``) ---------

    async def _cluster_fault(self, name: str) -> str:
        target = await getattr(self.broker, name)()
        self.counts[f"{name}s"] += 1
        return target

    async def kill_leader(self) -> str:
        return await self._cluster_fault("kill_leader")

    async def pause_broker(self) -> str:
        return await self._cluster_fault("pause_broker")

    async def rolling_restart(self) -> str:
        return await self._cluster_fault("rolling_restart")

    async def lose_broker(self) -> str:
        return await self._cluster_fault("lose_broker")

    async def kill_controller(self) -> str:
        return await self._cluster_fault("kill_controller")

    async def kill_projection(self) -> None:
        """SIGKILL the visibility / history projection and start it again: its at-least-once
        agents redo what was not acknowledged, and the seq guards keep every record once."""
        self.projection.kill()
        self.projection.start()
        self.counts["projection_kills"] += 1

    async def supervise(self, until: asyncio.Event) -> None:
        """What a process supervisor does in production: restart what died, every 2 s."""
        while not until.is_set():
            self.check_alive()
            try:
                await asyncio.wait_for(until.wait(), 2.0)
            except TimeoutError:
                pass

    async def run_faults(self, plan: list[str], seconds: float, t0: float) -> None:
        """Inject ``plan`` spread over ``seconds``, at seeded random moments."""
        loop = asyncio.get_running_loop()
        for i, fault in enumerate(plan):
            # spread what is left over the time that is left (a broker restart takes a while)
            gap = max(3.0, (t0 + seconds - loop.time()) / (len(plan) - i + 1))
            await asyncio.sleep(gap * self.rng.uniform(0.6, 1.4))
            self.check_alive()
            started = loop.time()
            started_mono = time.monotonic()
            target = await getattr(self, fault)()  # the pauses name whom they paused
            self.faults.append(
                {
                    "at_s": round(started - t0, 1),
                    "fault": fault,
                    "target": target,
                    "seconds": round(loop.time() - started, 1),
                    # for the partition probes (tests/faults/chaos/brokers.PartitionProbes)
                    "started": started_mono,
                }
            )
            self.fault_log.append(
                f"{started - t0:6.1f}s {fault}{f' {target}' if target else ''} ({loop.time() - started:.1f}s)"
            )
            log.warning("chaos: %s", self.fault_log[-1])
        self.check_alive()
