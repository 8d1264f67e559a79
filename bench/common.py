"""Shared pieces of the benchmarks: settings, namespaces, the Kadence processes, metrics, stats."""

from __future__ import annotations

import asyncio
import math
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from kadence.topics import Catalogue, KafkaConfig

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
QUEUE = "bench"

console = Console(stderr=True)


class BenchError(Exception):
    """A benchmark could not run (the message says why)."""


# -- settings ----------------------------------------------------------------------------------


def bootstrap() -> str:
    value = os.environ.get("KADENCE_KAFKA_BOOTSTRAP", "").strip()
    if not value:
        raise BenchError(
            "KADENCE_KAFKA_BOOTSTRAP is not set: run `make bench` (it starts a broker), or set it "
            "to a Kafka broker with transactions enabled"
        )
    return value


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise BenchError(f"{name} must be a number, got {raw!r}") from exc


def session_timeout_ms() -> str:
    """The group session timeout of the engine's processes in the bench:
    ``KADENCE_BENCH_SESSION_TIMEOUT_MS`` (6000 by default; the product's default is 10000), shorter
    than the product's so that the ``recovery`` scenario's replacement takes over sooner."""
    return str(int(env_float("KADENCE_BENCH_SESSION_TIMEOUT_MS", 6000)))


@dataclass
class Settings:
    bootstrap: str
    #: KADENCE_BENCH_SECONDS: measured duration of each scenario
    seconds: float
    #: KADENCE_BENCH_WARMUP: warm-up before each measurement window
    warmup: float
    #: KADENCE_BENCH_PARTITIONS: partitions of commands/history/state (and the task topics)
    partitions: int
    #: KADENCE_BENCH_CONCURRENCY: workflows in flight in the closed-loop throughput runs: one
    #: number, or a comma-separated list to probe (the best level is measured)
    concurrency_levels: list
    #: KADENCE_BENCH_WORKERS: worker subprocesses
    workers: int
    #: KADENCE_BENCH_TIMER_RATE: timers per second in the timer lateness run
    timer_rate: float
    #: KADENCE_BENCH_IDLE_WORKFLOWS: open idle workflows in the scale run
    idle_workflows: int
    #: KADENCE_BENCH_PROCESSORS: history processor instances (they share the partitions)
    processors: int = 1
    logdir: Path = field(default_factory=Path)

    @classmethod
    def from_env(cls) -> Settings:
        seconds = env_float("KADENCE_BENCH_SECONDS", 60.0)
        if seconds <= 0:
            raise BenchError("KADENCE_BENCH_SECONDS must be > 0")
        idle_default = int(min(20_000, max(5_000, 500 * seconds)))
        return cls(
            bootstrap=bootstrap(),
            seconds=seconds,
            warmup=env_float("KADENCE_BENCH_WARMUP", min(5.0, max(2.0, seconds / 5))),
            partitions=int(env_float("KADENCE_BENCH_PARTITIONS", 4)),
            concurrency_levels=_levels(os.environ.get("KADENCE_BENCH_CONCURRENCY") or "32,64,128,256,512"),
            workers=int(env_float("KADENCE_BENCH_WORKERS", 1)),
            processors=int(env_float("KADENCE_BENCH_PROCESSORS", 1)),
            timer_rate=env_float("KADENCE_BENCH_TIMER_RATE", 1000.0),
            idle_workflows=int(env_float("KADENCE_BENCH_IDLE_WORKFLOWS", idle_default)),
        )


def _levels(raw: str) -> list:
    try:
        levels = [int(x) for x in raw.split(",") if x.strip()]
    except ValueError as exc:
        raise BenchError(f"KADENCE_BENCH_CONCURRENCY must be numbers separated by commas, got {raw!r}") from exc
    if not levels or min(levels) < 1:
        raise BenchError("KADENCE_BENCH_CONCURRENCY needs at least one level >= 1")
    return levels


def own_cluster(config: dict | None = None):
    """A three-node PLAINTEXT cluster for a scenario of its own (``replication``, ``rebalance``),
    not started; each node's heap ``KADENCE_KAFKA_HEAP_MB`` (512); ``config``: more
    ``server.properties`` entries."""
    from kadence.devstack import cluster as devcluster

    return devcluster.KafkaCluster(
        3, die_with_parent=True, heap_mb=int(os.environ.get("KADENCE_KAFKA_HEAP_MB") or 512), config=config
    )


def new_namespace(settings: Settings, tag: str, *, queues=(QUEUE,), replication: int | None = None) -> KafkaConfig:
    """A fresh namespace with its topics (and the task topics of ``queues``) created;
    ``replication``: their replication factor (default: ``KADENCE_REPLICATION``)."""
    ns = f"b{tag.replace('_', '-')}-{uuid.uuid4().hex[:6]}"[:60]
    # from_env: the other settings (KADENCE_CLIENT_LINGER_MS, security) as the engine processes get them
    extra = {} if replication is None else {"replication": replication}
    config = KafkaConfig.from_env(bootstrap=settings.bootstrap, namespace=ns, partitions=settings.partitions, **extra)
    cat = Catalogue(config)
    specs = cat.core_specs() + [s for q in queues for s in cat.queue_specs(q)]
    cat.apply(specs)
    _wait_until_led(config, [s.name for s in specs])
    return config


def _wait_until_led(config: KafkaConfig, topics: list[str], timeout: float = 60.0) -> None:
    """Until every partition of ``topics`` answers an offset request: a topic created a moment
    ago may still answer NOT_LEADER_FOR_PARTITION, and processes started on it then fail at
    start-up (librdkafka even crashed on it now and then)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(config.consumer(None))
    deadline = time.monotonic() + timeout
    try:
        md = consumer.list_topics(timeout=timeout)
        pending = [TopicPartition(t, p) for t in topics if t in md.topics for p in md.topics[t].partitions]
        while pending:
            try:
                consumer.get_watermark_offsets(pending[-1], timeout=5)
                pending.pop()
            except KafkaException as exc:
                if time.monotonic() > deadline:
                    raise BenchError(f"{pending[-1].topic}[{pending[-1].partition}] has no leader: {exc}") from exc
                time.sleep(0.1)
    finally:
        consumer.close()


# -- processes ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Procs:
    """The Kadence processes of one scenario (children of the benchmark; stopped at the end)."""

    def __init__(self, config: KafkaConfig, logdir: Path, tag: str):
        self.config = config
        self.logdir = logdir
        self.tag = tag
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}
        self.metrics_ports: dict[str, int] = {}
        self._n = 0

    def _env(self, **extra) -> dict:
        env = {
            **os.environ,
            "KADENCE_KAFKA_BOOTSTRAP": self.config.bootstrap,
            "KADENCE_NAMESPACE": self.config.namespace,
            "KADENCE_PARTITIONS": str(self.config.partitions),
            "KADENCE_SESSION_TIMEOUT_MS": session_timeout_ms(),
            "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)])),
        }
        env.update(extra)
        return env

    def _spawn(self, name: str, argv: list[str], env: dict) -> subprocess.Popen:
        self._n += 1
        path = self.logdir / f"{self.tag}-{name}-{self._n}.log"
        with open(path, "w") as log:
            proc = subprocess.Popen(
                argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True
            )
        self.procs[name] = proc
        self.logs[name] = path
        return proc

    def start_processor(self, instance_id: str = "p0", **env) -> subprocess.Popen:
        port = free_port()
        self.metrics_ports[instance_id] = port
        argv = [sys.executable, "-m", "kadence.cli", "processor", "--metrics-port", str(port)]
        return self._spawn(instance_id, argv, self._env(KADENCE_PROCESSOR_ID=instance_id, **env))

    def start_timers(self, instance_id: str = "t0") -> subprocess.Popen:
        return self._spawn(
            instance_id, [sys.executable, "-m", "kadence.cli", "timers"], self._env(KADENCE_TIMERS_ID=instance_id)
        )

    def start_worker(self, name: str = "w0", queue: str = QUEUE, **env) -> subprocess.Popen:
        return self._spawn(
            name,
            [sys.executable, "-m", "kadence.cli", "worker", "--task-queue", queue, "--module", "bench.workloads"],
            self._env(**env),
        )

    def start_projections(self, redis_url: str, name: str = "projections") -> subprocess.Popen:
        argv = [sys.executable, "-m", "kadence.cli", "projections", "run", "--instance-id", "bench"]
        return self._spawn(name, argv, self._env(KADENCE_REDIS_URL=redis_url))

    def signal(self, name: str, sig: int) -> None:
        proc = self.procs.pop(name)
        if proc.poll() is None:
            proc.send_signal(sig)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def log_text(self, name: str) -> str:
        return self.logs[name].read_text(errors="replace")

    async def wait_log(self, name: str, pattern: str, timeout: float, *, count: int = 1) -> list[re.Match]:
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            found = list(rx.finditer(self.log_text(name)))
            if len(found) >= count:
                return found
            proc = self.procs.get(name)
            if proc is not None and proc.poll() is not None:
                raise BenchError(
                    f"{name} exited with code {proc.returncode}; log {self.logs[name]}:\n{self.log_text(name)[-2000:]}"
                )
            if time.monotonic() > deadline:
                raise BenchError(f"{name}: no {pattern!r} in its log within {timeout}s ({self.logs[name]})")
            await asyncio.sleep(0.05)

    def metrics(self, instance_id: str | None = None) -> dict[str, float]:
        """One processor's metrics, or (None) the sum over every processor instance."""
        if instance_id is not None:
            return scrape(self.metrics_ports[instance_id])
        total: dict[str, float] = {}
        for name in self.metrics_ports:
            for key, value in scrape(self.metrics_ports[name]).items():
                total[key] = total.get(key, 0.0) + value
        return total

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise BenchError(
                    f"{name} exited with code {proc.returncode}; log {self.logs[name]}:\n{self.log_text(name)[-2000:]}"
                )

    def close(self) -> None:
        for name in list(self.procs):
            proc = self.procs[name]
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in list(self.procs.values()):
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()


def scrape(port: int) -> dict[str, float]:
    """Prometheus text format -> {sample name with labels: value} (unlabelled names plain)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            continue
    return out


def metric_sum(samples: dict, name: str) -> float:
    """The sum of sample ``name`` over all its label sets (``scrape``'s keys)."""
    return sum(v for k, v in samples.items() if k == name or k.startswith(name + "{"))


def metric_delta(before: dict, after: dict, name: str) -> float:
    return metric_sum(after, name) - metric_sum(before, name)


def poll_ready(consumer, most: int, timeout: float) -> list:
    """Wait up to ``timeout`` for one record, then take whatever else is ready (``consume(n, t)``
    alone waits for n records or the whole timeout, which would add latency to what we measure)."""
    first = consumer.poll(timeout)
    if first is None:
        return []
    return [first, *consumer.consume(num_messages=most - 1, timeout=0)]


# -- CPU accounting ----------------------------------------------------------------------------


def broker_process(bootstrap: str) -> psutil.Process | None:
    """The process listening on the first bootstrap port on this machine, if any (the broker)."""
    try:
        port = int(bootstrap.split(",")[0].rsplit(":", 1)[1])
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                return psutil.Process(conn.pid)
    except (psutil.Error, ValueError, IndexError, PermissionError):
        return None
    return None


class CpuMeter:
    """CPU seconds used by named processes between ``start()`` and ``stop()``, as % of one core."""

    def __init__(self, procs: dict[str, int | psutil.Process | None]):
        self._procs = {}
        for name, p in procs.items():
            if p is None:
                continue
            try:
                self._procs[name] = p if isinstance(p, psutil.Process) else psutil.Process(p)
            except psutil.Error:
                pass
        self._t0 = 0.0
        self._c0: dict[str, float] = {}

    @staticmethod
    def _cpu(p: psutil.Process) -> float:
        try:
            t = p.cpu_times()
            return t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            return float("nan")

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._c0 = {n: self._cpu(p) for n, p in self._procs.items()}
        self._sys0 = psutil.cpu_times()

    def stop(self) -> dict[str, float]:
        dt = time.monotonic() - self._t0
        out = {n: round(100 * (self._cpu(p) - self._c0[n]) / dt, 1) for n, p in self._procs.items()}
        sys1 = psutil.cpu_times()
        idle = (sys1.idle - self._sys0.idle) + (getattr(sys1, "iowait", 0) - getattr(self._sys0, "iowait", 0))
        out["machine_busy"] = round(100 * (psutil.cpu_count() - idle / dt), 1)
        return out


def cpu_per_workflow(usage: dict, seconds: float, workflows: int) -> dict:
    """CPU ms per completed workflow from a ``CpuMeter``'s % of a core over ``seconds``, per
    process (the bench's own and the machine's total left out), and the engine's processes in
    all (``engine``: every one but the broker)."""
    if not workflows:
        return {}
    per = {
        k: round(v / 100 * seconds * 1000 / workflows, 2)
        for k, v in usage.items()
        if k not in ("machine_busy", "bench")
    }
    per["engine"] = round(sum(v for k, v in per.items() if k != "broker"), 2)
    return per


# -- statistics --------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100); NaN when empty."""
    if not values:
        return float("nan")
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    k = (len(xs) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary(values: list[float], digits: int = 2) -> dict:
    return {
        "p50": round(percentile(values, 50), digits),
        "p95": round(percentile(values, 95), digits),
        "p99": round(percentile(values, 99), digits),
        "max": round(max(values), digits) if values else None,
        "mean": round(sum(values) / len(values), digits) if values else None,
        "samples": len(values),
    }


# -- progress ----------------------------------------------------------------------------------


def alternating_summary(
    runs: dict[str, list[dict]], keys: tuple[str, ...], base: str
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float | None]]]:
    """Per mode, the mean of ``keys`` over its alternating runs; and, per other mode, each mean's
    ratio to ``base``'s (None where the base measured 0). What the A/B scenarios report."""
    mean = {m: {k: round(sum(r[k] for r in rs) / len(rs), 2) for k in keys} for m, rs in runs.items()}
    ratio = {
        m: {k: round(mean[m][k] / mean[base][k], 3) if mean[base][k] else None for k in keys} for m in runs if m != base
    }
    return mean, ratio


#: two-sided 95 % quantiles of Student's t for 1..10 degrees of freedom (more: 2.2, then 1.96)
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def paired_ratios(runs: dict[str, list[dict]], key: str, base: str) -> dict[str, dict[str, object]]:
    """Per mode other than ``base``: its ``key`` over ``base``'s in the same round, each round's,
    their mean, min and max, and a 95 % confidence interval of the mean (Student's t; None with
    one round). What a round's machine state does to both modes cancels out of its ratio, which
    the ratio of the modes' means does not do."""
    out: dict[str, dict[str, object]] = {}
    for mode, rs in runs.items():
        if mode == base:
            continue
        # a window with nothing measured (None) leaves its round out rather than ending the run
        per = [r[key] / b[key] for r, b in zip(rs, runs[base], strict=True) if b[key] and r[key] is not None]
        if not per:
            continue
        mean = statistics.fmean(per)
        ci = None
        if len(per) > 1:
            sd = statistics.stdev(per)
            df = len(per) - 1
            t = _T95[df - 1] if df <= len(_T95) else (2.2 if df < 30 else 1.96)
            half = t * sd / len(per) ** 0.5
            ci = [round(mean - half, 3), round(mean + half, 3)]
        out[mode] = {
            "per_round": [round(x, 3) for x in per],
            "mean": round(mean, 3),
            "min": round(min(per), 3),
            "max": round(max(per), 3),
            "ci95": ci,
        }
    return out


def make_progress() -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.fields[scenario]:<26}"),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        refresh_per_second=4,
    )


@dataclass
class Context:
    settings: Settings
    progress: Progress
    #: results so far (later scenarios use earlier ones: the half-load rate, the batch size)
    results: dict = field(default_factory=dict)

    def task(self, scenario: str, description: str = "starting"):
        return self.progress.add_task(description, scenario=scenario, total=None)

    def update(self, task, description: str) -> None:
        self.progress.update(task, description=description)
