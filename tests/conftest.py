"""Shared fixtures.

Integration tests need a real Kafka broker. ``make test`` starts one (scripts/devstack.py) and
sets KADENCE_KAFKA_BOOTSTRAP; when pytest runs without it, the session starts a broker itself.
If no broker can be had, every integration test ERRORS: nothing is skipped.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def kafka_bootstrap():
    bootstrap = os.environ.get("KADENCE_KAFKA_BOOTSTRAP")
    if bootstrap:
        yield bootstrap
        return
    sys.path.insert(0, str(ROOT / "scripts"))
    import devstack  # noqa: E402 - the project's own broker launcher

    broker = devstack.KafkaBroker(die_with_parent=True)
    try:
        broker.start()
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"no Kafka broker: KADENCE_KAFKA_BOOTSTRAP is unset and starting one failed: {exc}",
                    pytrace=False)
    os.environ["KADENCE_KAFKA_BOOTSTRAP"] = broker.bootstrap
    try:
        yield broker.bootstrap
    finally:
        broker.stop()
        broker.cleanup()
