"""Requests the bench's broker served, by API key (issue 45 item 3): its
``kafka.network:type=RequestMetrics,name=RequestsPerSec,request=<API>`` meters' counts, read
over JMX with Kafka's own ``JmxTool`` (a JVM started per reading: read before and after a
window, not during it). The dev stack's broker serves JMX on the loopback
(``KADENCE_BROKER_JMX_PORT``, ``devstack/services.py``); without it the readings are empty."""

from __future__ import annotations

import os
import re
import subprocess

from kadence.devstack.services import java_binary, resolve_jars

_NAME = re.compile(r"request=([A-Za-z]+)")
#: meters that count a part of another's requests again
SUBSETS = frozenset({"FetchConsumer", "FetchFollower"})


class BrokerRequests:
    def __init__(self, port: int | None = None) -> None:
        env_port = os.environ.get("KADENCE_BROKER_JMX_PORT")
        self.port = port or (int(env_port) if env_port else None)
        self._argv: list[str] | None = None

    @property
    def available(self) -> bool:
        return self.port is not None

    def snapshot(self) -> dict[str, float]:
        """API key -> requests served so far (empty without JMX)."""
        if self.port is None:
            return {}
        if self._argv is None:
            self._argv = [
                java_binary(),
                "-Xmx64m",
                "-XX:TieredStopAtLevel=1",
                "-cp",
                f"{resolve_jars()}/*",
                "org.apache.kafka.tools.JmxTool",
                "--jmx-url",
                f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{self.port}/jmxrmi",
                "--object-name",
                "kafka.network:type=RequestMetrics,name=RequestsPerSec,*",  # also keyed by version
                "--attributes",
                "Count",
                "--one-time",
                "true",
                "--report-format",
                "csv",
            ]
        out = subprocess.run(self._argv, capture_output=True, text=True, timeout=60)
        # one '<object name>:<attribute>,"<value>"' line each (Kafka 4's csv one-time report;
        # the object name holds commas of its own)
        rows = [line.rsplit(",", 1) for line in out.stdout.splitlines() if "," in line]
        counts: dict[str, float] = {}
        for name, raw in rows:
            value = raw.strip().strip('"')
            m = _NAME.search(name)
            if m and name.endswith(":Count"):
                counts[m.group(1)] = counts.get(m.group(1), 0.0) + float(value)
        if not counts:
            raise RuntimeError(f"JmxTool gave no reading: {out.stdout[-200:]} {out.stderr.strip()[-300:]}")
        return counts


def per_workflow(before: dict[str, float], after: dict[str, float], workflows: int) -> dict[str, float]:
    """Requests per workflow by API key between two snapshots (those above 0.05), and ``all``."""
    if not workflows:
        return {}
    per = {k: round((after.get(k, 0) - before.get(k, 0)) / workflows, 2) for k in after}
    per = {k: v for k, v in sorted(per.items(), key=lambda kv: -kv[1]) if v >= 0.05}
    # FetchConsumer and FetchFollower are Fetch's own, counted again by who sent it
    per["all"] = round(sum(v for k, v in per.items() if k not in SUBSETS), 2)
    return per
