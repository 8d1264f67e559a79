"""A replicated, secured Kafka cluster for the tests of this folder: three KRaft nodes (RF 3,
min ISR 2) with a SASL_SSL listener (SCRAM-SHA-512, a throw-away CA), a mutual-TLS listener
(``mtls_bootstrap``: clients authenticate with a certificate) and ACLs, started once for the
folder by ``kadence.devstack.cluster.KafkaCluster``. Users: ``app``, granted every component's
ACLs (``kadence acls``) in the namespace ``NAMESPACE`` (docs/deploy.md, "ACLs"); ``stranger``,
granted nothing; and
``least-{component}`` for each of ``LEAST_PRIVILEGE``, granted what ``kadence acls`` gives them."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kadence.devstack import cluster as devcluster
from kadence.devstack import services as devstack
from kadence.topics import Catalogue, KafkaConfig
from kadence.topics.acls import COMPONENTS, apply_acls

NAMESPACE = "sec"
PARTITIONS = 4
#: the components the least-privilege test runs each as a user of its own, with only its ACLs
LEAST_PRIVILEGE = ("admin", "processor", "timers", "worker", "client", "projections")


@pytest.fixture(scope="package")
def cluster():
    names = ("app", "stranger", *(f"least-{c}" for c in LEAST_PRIVILEGE))
    users = {name: secrets.token_urlsafe(12) for name in names}
    c = devcluster.KafkaCluster(3, secure=True, mtls=True, users=users, die_with_parent=True, heap_mb=384)
    try:
        c.start()
        # every component's ACLs in NAMESPACE for app, as `kadence acls ... --apply` creates them
        apply_acls(
            KafkaConfig.from_env({**c.client_env("admin"), "KADENCE_NAMESPACE": NAMESPACE}), COMPONENTS, "User:app"
        )
    except Exception as exc:  # noqa: BLE001 - no cluster: every test here errors, none is skipped
        c.cleanup()
        pytest.fail(f"the secured three-node cluster did not start: {exc}", pytrace=False)
    try:
        yield c
    finally:
        c.cleanup()


def cluster_env(cluster, user: str = "app", **extra: str) -> dict[str, str]:
    """The environment of a Kadence process connecting as ``user`` to ``NAMESPACE``."""
    return {
        **os.environ,
        **cluster.client_env(user),
        "KADENCE_NAMESPACE": NAMESPACE,
        "KADENCE_PARTITIONS": str(PARTITIONS),
        **extra,
    }


@pytest.fixture(scope="package")
def app_config(cluster) -> KafkaConfig:
    """The ``app`` user's configuration, with the namespace's topics created (RF 3, min ISR 2)."""
    config = KafkaConfig.from_env(cluster_env(cluster))
    Catalogue(config).apply()
    return config


def run_kadence(args: list[str], env: dict[str, str], timeout: float = 60) -> tuple[int, str, float]:
    """``kadence ARGS`` to its end: (status, stdout and stderr, seconds it took)."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "kadence.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - started


def stop_all(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each process (in reverse start order), then wait up to 20 s each; kill a laggard."""
    for proc in reversed(procs):
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def free_port() -> int:
    return devstack.free_port()


def log_tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else f"({path} missing)"
