"""Fixtures for tests on the real broker: a fresh namespace per test, processor processes,
a connected client."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kadence import Client
from kadence.topics import Catalogue, KafkaConfig
from tests.support.namespaces import drop_namespace

PARTITIONS = 4


@pytest.fixture
def kafka_config(kafka_bootstrap):
    """A namespace of its own for each test, with its topics created, and deleted after it (the
    dev broker may hold only so many partitions: ``tests/support/namespaces.py``)."""
    ns = f"t{uuid.uuid4().hex[:10]}"
    config = KafkaConfig(bootstrap=kafka_bootstrap, namespace=ns, partitions=PARTITIONS)
    Catalogue(config).apply()
    yield config
    drop_namespace(config)


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 30) -> bool:
    """Send ``sig`` and wait up to ``timeout``; SIGKILL what is still running then. Whether it
    stopped on ``sig``."""
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
        return True
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False


class ProcessorProcs:
    """Starts `kadence processor` instances as child processes, so tests can SIGKILL them."""

    def __init__(self, config: KafkaConfig, logdir: Path):
        self.config = config
        self.logdir = logdir
        self.procs: dict[str, subprocess.Popen] = {}
        self.starts = 0

    def start(self, instance_id: str = "p0", env: dict | None = None, module: str = "kadence.cli") -> subprocess.Popen:
        """``env``: extra environment for this instance (e.g. KADENCE_PROCESSOR_METRICS_PORT);
        ``module``: what ``python -m`` runs (a test's wrapper of the CLI)."""
        self.starts += 1
        log = open(self.logdir / f"processor-{instance_id}-{self.starts}.log", "w")
        env = {
            **os.environ,
            "KADENCE_KAFKA_BOOTSTRAP": self.config.bootstrap,
            "KADENCE_NAMESPACE": self.config.namespace,
            "KADENCE_PROCESSOR_ID": instance_id,
            "KADENCE_SESSION_TIMEOUT_MS": "6000",
            **(env or {}),
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", module, "processor"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        self.procs[instance_id] = proc
        return proc

    def kill(self, instance_id: str = "p0") -> None:
        proc = self.procs.pop(instance_id)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def stop(self, instance_id: str = "p0") -> None:
        proc = self.procs.pop(instance_id)
        if not stop_process(proc):
            raise AssertionError(f"processor {instance_id} did not stop on SIGTERM")

    def start_timers(
        self, instance_id: str = "t0", env: dict | None = None, module: str = "kadence.cli"
    ) -> subprocess.Popen:
        """A `kadence timers` instance; its log is timers-{instance_id}-{n}.log in the logdir;
        ``env``: extra environment (e.g. KADENCE_TIMERS_METRICS_PORT)."""
        self.starts += 1
        log = open(self.logdir / f"timers-{instance_id}-{self.starts}.log", "w")
        env = {
            **os.environ,
            "KADENCE_KAFKA_BOOTSTRAP": self.config.bootstrap,
            "KADENCE_NAMESPACE": self.config.namespace,
            "KADENCE_TIMERS_ID": instance_id,
            "KADENCE_SESSION_TIMEOUT_MS": "6000",
            "KADENCE_TIMERS_LOG_INTERVAL_S": "1",
            **(env or {}),
        }
        proc = subprocess.Popen([sys.executable, "-m", module, "timers"], env=env, stdout=log, stderr=subprocess.STDOUT)
        self.procs[f"timers:{instance_id}"] = proc
        return proc

    def kill_timers(self, instance_id: str = "t0") -> None:
        self.kill(f"timers:{instance_id}")

    def stop_timers(self, instance_id: str = "t0") -> None:
        self.stop(f"timers:{instance_id}")

    def dump_stacks(self) -> None:
        """Every live process writes all its threads' stacks to its log (``kill -USR1``: the CLI
        services register faulthandler for it), so a failed test shows where a process sat."""
        live = [proc for proc in self.procs.values() if proc.poll() is None]
        for proc in live:
            proc.send_signal(signal.SIGUSR1)
        if live:
            time.sleep(1.0)  # faulthandler writes from the signal handler; give it the moment

    def logs(self) -> str:
        out = [
            f"--- {name}: exited with status {proc.returncode}"
            for name, proc in self.procs.items()
            if proc.poll() is not None
        ]
        for path in sorted(self.logdir.glob("processor-*.log")):
            out.append(f"--- {path.name}\n{path.read_text()[-4000:]}")
        return "\n".join(out)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.procs.clear()


@pytest.fixture
def processors(kafka_config, tmp_path, request):
    procs = ProcessorProcs(kafka_config, tmp_path)
    yield procs
    failed = request.node.rep_call.failed if hasattr(request.node, "rep_call") else False
    if failed:
        procs.dump_stacks()
    report = procs.logs() if failed else ""  # before close(): it names the processes that had exited
    procs.close()
    if report:
        print(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)


@pytest.fixture
async def client(kafka_config):
    c = await Client.connect(config=kafka_config)
    yield c
    await c.close()


async def wait_until(predicate, timeout: float, what: str, interval: float = 0.2):
    """Poll an (async or sync) predicate until true; fail with ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


# -- the gateway tests' fixtures (helpers: gateway_support.py) ------------------------------------


@pytest.fixture(scope="module")
def gw_config(kafka_bootstrap):
    config = KafkaConfig(bootstrap=kafka_bootstrap, namespace=f"g{uuid.uuid4().hex[:10]}", partitions=4)
    Catalogue(config).apply()
    yield config
    drop_namespace(config)


@pytest.fixture(scope="module")
def engine(gw_config, tmp_path_factory):
    """One history processor process for the module's tests."""
    procs = ProcessorProcs(gw_config, tmp_path_factory.mktemp("gateway-processor"))
    procs.start()
    yield procs
    alive = all(p.poll() is None for p in procs.procs.values())
    logs = procs.logs()
    procs.close()
    assert alive, f"the history processor died during the gateway tests:\n{logs}"


@pytest.fixture(scope="module")
def api_key(gw_config) -> str:
    from .gateway_support import make_key

    return make_key(gw_config.namespace)


@pytest.fixture(scope="module")
def gateway_url(gw_config, engine):
    from kadence.gateway import GatewayConfig, create_app

    from .gateway_support import redis_url, serve

    with serve(create_app(GatewayConfig(kafka=gw_config, reply_timeout=30.0, redis_url=redis_url()))) as url:
        yield url


@pytest.fixture(scope="module")
def gw_projection(gw_config, tmp_path_factory):
    """The visibility projection of the gateway tests' namespace (a process for the module)."""
    from .projection_support import ProjectionProcs

    procs = ProjectionProcs(gw_config, tmp_path_factory.mktemp("gateway-projection"))
    procs.start()
    yield procs
    alive = all(p.poll() is None for p in procs.procs.values())
    logs = procs.logs()
    procs.close()
    assert alive, f"the projection died during the test:\n{logs}"


@pytest.fixture
async def http(gateway_url, api_key):
    from .gateway_support import auth, checked_client

    async with checked_client(gateway_url, headers=auth(api_key)) as client:
        yield client
