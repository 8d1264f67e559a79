"""``kadence processor`` plus a Prometheus endpoint: the same ``HistoryProcessor`` built the
same way as ``cli.main.processor`` (``ProcessorConfig.from_env``), with its registry served on
``127.0.0.1:<port>`` so the benchmark can read the processor's own counters.

Used only when ``kadence processor`` has no ``--metrics-port`` option (see bench.common)."""

from __future__ import annotations

import logging
import signal
import sys

from prometheus_client import CollectorRegistry, start_http_server

from kadence.processors import HistoryProcessor, ProcessorConfig
from kadence.topics import KafkaConfig


def main() -> None:
    port = int(sys.argv[1])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    registry = CollectorRegistry()
    proc = HistoryProcessor(ProcessorConfig.from_env(KafkaConfig.from_env()), registry=registry)
    start_http_server(port, addr="127.0.0.1", registry=registry)
    signal.signal(signal.SIGTERM, lambda *_: proc.stop())
    signal.signal(signal.SIGINT, lambda *_: proc.stop())
    proc.run()


if __name__ == "__main__":
    main()
