"""The HTTP endpoints of ``kadence processor``, ``kadence timers``, ``kadence worker`` and ``kadence projections
run`` (``--metrics-port``, on loopback unless ``--metrics-host`` says otherwise, as in a container):
``/metrics`` (Prometheus), ``/healthz`` (200 while the process runs: a liveness probe) and
``/readyz`` (200 once the service serves and the broker answers; 503 with the reason otherwise:
``starting`` or ``waiting for the broker``).

The standard library's threading HTTP server, not a web framework: three read-only paths on a
loopback port do not need one, and the engine processes do not depend on the gateway's stack.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import click
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from kadence.topics import Catalogue, KafkaConfig

__all__ = ["BrokerCheck", "HealthServer", "metrics_host_option", "readiness", "serve_health"]

#: ``--metrics-host``: the address the health and metrics port listens on; loopback by default,
#: ``0.0.0.0`` where a probe or Prometheus asks from outside the process's network namespace
metrics_host_option = click.option(
    "--metrics-host",
    envvar="KADENCE_METRICS_HOST",
    default="127.0.0.1",
    show_default=True,
    help="address of the --metrics-port server (0.0.0.0 in a container) [env KADENCE_METRICS_HOST]",
)


class BrokerCheck:
    """Whether the broker answers a metadata request, asked at most every ``cache_s`` seconds."""

    def __init__(self, ask: Callable[[], object], *, cache_s: float = 2.0) -> None:
        self._ask = ask
        self.cache_s = cache_s
        self._lock = threading.Lock()
        self._at = -float("inf")
        self._error: str | None = "not asked yet"

    def __call__(self) -> str | None:
        """None when the broker answers, else why not."""
        with self._lock:
            if time.monotonic() - self._at >= self.cache_s:
                try:
                    self._ask()
                    self._error = None
                except Exception as exc:  # noqa: BLE001 - any failure to answer is "not ready"
                    self._error = str(exc) or type(exc).__name__
                self._at = time.monotonic()
            return self._error


def readiness(started: Callable[[], bool], broker: Callable[[], str | None]) -> tuple[bool, dict[str, Any]]:
    """(ready, body) of ``/readyz``."""
    if not started():
        error = broker()
        status = "waiting for the broker" if error is not None else "starting"
        return False, {"status": status, **({"broker": error} if error else {})}
    error = broker()
    if error is not None:
        return False, {"status": "waiting for the broker", "broker": error}
    return True, {"status": "ready"}


class HealthServer:
    """Serves the three paths on ``host:port`` from a daemon thread."""

    def __init__(
        self,
        port: int,
        registry: CollectorRegistry,
        ready: Callable[[], tuple[bool, dict[str, Any]]],
        *,
        host: str = "127.0.0.1",
    ) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server interface
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(outer.registry), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    self._json(200, {"status": "alive"})
                elif path == "/readyz":
                    ok, body = outer.ready()
                    self._json(200 if ok else 503, body)
                else:
                    self._json(404, {"error": "not_found", "paths": ["/metrics", "/healthz", "/readyz"]})

            def _json(self, code: int, body: dict[str, Any]) -> None:
                self._send(code, json.dumps(body).encode(), "application/json")

            def _send(self, code: int, data: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:  # probes every few seconds: not worth a log line
                pass

        self.registry = registry
        self.ready = ready
        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="kadence-health", daemon=True)

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def serve_health(
    config: KafkaConfig, port: int, host: str, registry: CollectorRegistry, started: Callable[[], bool]
) -> HealthServer:
    """The three paths of a process on ``host:port``, started: ``/readyz`` is 200 once
    ``started()`` and the broker answers a metadata request as ``config``'s principal (a refused
    login reads as such, not as a broker that does not answer)."""
    catalogue = Catalogue(config)
    admin = catalogue.admin()
    broker = BrokerCheck(lambda: catalogue.existing(admin, timeout=2))
    return HealthServer(port, registry, lambda: readiness(started, broker), host=host).start()
