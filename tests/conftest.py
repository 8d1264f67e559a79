"""Shared fixtures.

Integration tests need a real Kafka broker. ``make test`` starts one (scripts/devstack.py) and
sets KADENCE_KAFKA_BOOTSTRAP; when pytest runs without it, the session starts a broker itself.
If no broker can be had, every integration test ERRORS: nothing is skipped.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def kafka_bootstrap():
    bootstrap = os.environ.get("KADENCE_KAFKA_BOOTSTRAP")
    if bootstrap:
        yield bootstrap
        return
    from kadence.devstack import services as devstack  # the project's own broker launcher

    broker = devstack.KafkaBroker(die_with_parent=True)
    try:
        broker.start()
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"no Kafka broker: KADENCE_KAFKA_BOOTSTRAP is unset and starting one failed: {exc}", pytrace=False)
    os.environ["KADENCE_KAFKA_BOOTSTRAP"] = broker.bootstrap
    try:
        yield broker.bootstrap
    finally:
        broker.stop()
        broker.cleanup()


def pytest_collection_modifyitems(config, items):
    """``make test`` runs the suite on two xdist workers with ``--dist loadgroup``: each test file
    stays on one worker (its module-scoped fixtures start once), and the cluster tests share one
    worker, so the folder's three-node cluster (a package fixture) starts once. Tests that bound a
    latency against the same test's unloaded figure join that worker's group too, so they never run
    beside the cluster's three JVMs starting and failing over on a 2-core machine (a fairness p99
    once read 397 ms against 39 ms unloaded in a full run, where the cluster's tests were the likely
    neighbour, and 40-56 ms in runs without them)."""
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        apart = path.startswith("tests/cluster/") or path in BESIDE_NO_CLUSTER
        item.add_marker(pytest.mark.xdist_group("cluster" if apart else path))


#: test files whose assertions compare latencies measured seconds apart (see above)
BESIDE_NO_CLUSTER = frozenset({"tests/integration/test_priority.py"})
