"""A pytest plugin for users' integration tests against the real engine (installed with
kadence, so its fixtures are there in any project; docs/testing.md, "Against the real engine").

Fixtures:

* ``kadence_stack`` (session): a Kafka broker and a Redis server, ``KadenceStack(bootstrap,
  redis_url)``. Chosen by ``--kadence-stack`` or ``KADENCE_TEST_STACK``:

  - ``devstack`` (default): the ones ``KADENCE_KAFKA_BOOTSTRAP`` / ``KADENCE_REDIS_URL`` name
    when set (a test run under ``scripts/devstack.py run``), else a broker and a Redis started
    here by ``kadence.devstack.services`` (Kafka's jars from Maven Central, Java and
    redis-server from the system; stopped at the end of the session);
  - ``testcontainers``: the testcontainers Kafka and Redis modules (``pip install
    'kadence[testcontainers]'``, a Docker engine); not tested here, where no engine runs;
  - ``external``: only what the two variables name (fails without them).

  A stack that cannot be had is an error, never a skip.
* ``kadence_engine`` (session): a fresh namespace on that stack with its topics, a history
  processor and a timer service running (``kadence processor``, ``kadence timers``
  subprocesses); its ``KafkaConfig``.
* ``kadence_client`` (function): a ``Client`` connected to that namespace, closed afterwards.

A test then runs a ``Worker`` of its own::

    async def test_checkout(kadence_client):
        async with Worker(kadence_client, task_queue="orders", workflows=[Checkout], activities=[charge]):
            assert await kadence_client.execute_workflow(Checkout, order, id="o-1", task_queue="orders")
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kadence import Client
    from kadence.topics import KafkaConfig

import os
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass

import pytest

__all__ = ["KadenceStack"]

STACKS = ("devstack", "testcontainers", "external")


@dataclass(frozen=True)
class KadenceStack:
    bootstrap: str
    redis_url: str | None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--kadence-stack",
        default=None,
        choices=STACKS,
        help="where kadence_stack gets Kafka and Redis: devstack (default), testcontainers, external "
        "[env KADENCE_TEST_STACK]",
    )


def _choice(config: pytest.Config) -> str:
    value = config.getoption("--kadence-stack") or os.environ.get("KADENCE_TEST_STACK") or "devstack"
    if value not in STACKS:
        raise pytest.UsageError(f"KADENCE_TEST_STACK must be one of {', '.join(STACKS)}, got {value!r}")
    return value


def _devstack() -> Generator[KadenceStack, None, None]:
    from kadence.devstack import services as devstack

    bootstrap, redis_url = os.environ.get("KADENCE_KAFKA_BOOTSTRAP"), os.environ.get("KADENCE_REDIS_URL")
    services: list[devstack.KafkaBroker | devstack.RedisServer] = []
    try:
        if not bootstrap:
            broker = devstack.KafkaBroker(die_with_parent=True)
            broker.start()
            services.append(broker)
            bootstrap = broker.bootstrap
        if not redis_url:
            redis = devstack.RedisServer(die_with_parent=True)
            redis.start()
            services.append(redis)
            redis_url = redis.url
        yield KadenceStack(bootstrap, redis_url)
    finally:
        for service in reversed(services):
            service.stop()
            service.cleanup()


# pragma: no cover - needs a Docker engine, which this project's CI has not
def _testcontainers() -> Generator[KadenceStack, None, None]:
    try:
        from testcontainers.kafka import KafkaContainer
        from testcontainers.redis import RedisContainer
    except ImportError as exc:
        raise pytest.UsageError(
            "KADENCE_TEST_STACK=testcontainers needs pip install 'kadence[testcontainers]'"
        ) from exc
    with KafkaContainer() as kafka, RedisContainer() as redis:
        host, port = redis.get_container_host_ip(), redis.get_exposed_port(6379)
        yield KadenceStack(kafka.get_bootstrap_server(), f"redis://{host}:{port}/0")


def _external() -> Generator[KadenceStack, None, None]:
    bootstrap = os.environ.get("KADENCE_KAFKA_BOOTSTRAP")
    if not bootstrap:
        raise pytest.UsageError("KADENCE_TEST_STACK=external needs KADENCE_KAFKA_BOOTSTRAP (and KADENCE_REDIS_URL)")
    yield KadenceStack(bootstrap, os.environ.get("KADENCE_REDIS_URL"))


@pytest.fixture(scope="session")
def kadence_stack(request: pytest.FixtureRequest) -> Iterator[KadenceStack]:
    """Kafka and Redis for the session (see the module's docstring)."""
    make = {"devstack": _devstack, "testcontainers": _testcontainers, "external": _external}[_choice(request.config)]
    gen = make()
    try:
        stack = next(gen)
    except Exception as exc:  # noqa: BLE001 - reported as the fixture's error, not a skip
        pytest.fail(f"kadence_stack: no Kafka broker or Redis: {type(exc).__name__}: {exc}", pytrace=False)
    yield stack
    gen.close()


@pytest.fixture(scope="session")
def kadence_engine(kadence_stack: KadenceStack) -> Iterator[KafkaConfig]:
    """A fresh namespace with a history processor and a timer service; its ``KafkaConfig``."""
    from kadence.topics import Catalogue, KafkaConfig

    config = KafkaConfig(bootstrap=kadence_stack.bootstrap, namespace=f"test{uuid.uuid4().hex[:10]}")
    Catalogue(config).apply()
    env = {**os.environ, "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap, "KADENCE_NAMESPACE": config.namespace}
    if kadence_stack.redis_url:
        env["KADENCE_REDIS_URL"] = kadence_stack.redis_url
    logs = tempfile.mkdtemp(prefix="kadence-engine-")
    procs = []
    for role in ("processor", "timers"):
        log = open(os.path.join(logs, f"{role}.log"), "wb")  # noqa: SIM115 - closed below
        procs.append(
            (
                role,
                subprocess.Popen(
                    [sys.executable, "-m", "kadence.cli", role, "--instance-id", "pytest-0"],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                ),
                log,
            )
        )
    try:
        yield config
    finally:
        died = [role for role, p, _log in procs if p.poll() is not None]
        for _role, p, _log in procs:
            p.terminate()
        for _role, p, log in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
            log.close()
    if died:  # the tests that waited for it failed on timeouts; say why, once
        raise RuntimeError(
            f"kadence_engine: the {' and '.join(died)} exited during the session; their logs are in {logs}"
        )


try:  # pytest-asyncio's strict mode needs its own decorator for an async fixture
    from pytest_asyncio import fixture as _async_fixture
except ImportError:  # pragma: no cover - anyio's plugin takes pytest.fixture
    _async_fixture = pytest.fixture  # type: ignore[assignment]  # the same decorator, typed apart


@_async_fixture
async def kadence_client(kadence_engine: KafkaConfig) -> AsyncIterator[Client]:
    """A ``Client`` of the engine's namespace (it waits for the broker up to 60 s)."""
    from kadence import Client

    client = await Client.connect(config=kadence_engine, wait_for_broker=60)
    try:
        yield client
    finally:
        await client.close()
