"""The processor's and timer service's HTTP endpoints: metrics, liveness, readiness (no broker:
the service state and the broker check are stand-ins)."""

import httpx
from prometheus_client import CollectorRegistry, Counter

from kadence.cli.health import BrokerCheck, HealthServer, readiness


def _server(state):
    registry = CollectorRegistry()
    Counter("kadence_test_things", "things", registry=registry).inc(3)
    ready = lambda: readiness(lambda: state["started"], lambda: state["broker"])  # noqa: E731
    return HealthServer(0, registry, ready).start()


def test_readyz_follows_the_service_and_the_broker():
    state = {"started": False, "broker": "KafkaError{code=_TRANSPORT}"}
    server = _server(state)
    base = f"http://127.0.0.1:{server.port}"
    try:
        resp = httpx.get(f"{base}/readyz")
        assert resp.status_code == 503
        assert resp.json() == {"status": "waiting for the broker", "broker": "KafkaError{code=_TRANSPORT}"}
        state["broker"] = None  # the broker answers; the service is still restoring
        resp = httpx.get(f"{base}/readyz")
        assert (resp.status_code, resp.json()) == (503, {"status": "starting"})
        state["started"] = True
        resp = httpx.get(f"{base}/readyz")
        assert (resp.status_code, resp.json()) == (200, {"status": "ready"})
        state["broker"] = "timed out"  # a broker restart while it serves
        resp = httpx.get(f"{base}/readyz")
        assert (resp.status_code, resp.json()["status"]) == (503, "waiting for the broker")
        # liveness does not depend on the broker
        assert httpx.get(f"{base}/healthz").json() == {"status": "alive"}
        metrics = httpx.get(f"{base}/metrics")
        assert metrics.status_code == 200 and "kadence_test_things_total 3.0" in metrics.text
        assert httpx.get(f"{base}/nope").status_code == 404
    finally:
        server.close()


def test_the_broker_is_asked_at_most_once_per_cache_period():
    calls = []

    def ask():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("Local: Broker transport failure")

    check = BrokerCheck(ask, cache_s=3600)
    assert check() == "Local: Broker transport failure"
    assert check() == "Local: Broker transport failure" and len(calls) == 1  # cached
    check.cache_s = 0
    assert check() is None and len(calls) == 2
