"""Helpers of the projection tests: the projection process, ground truth from the history topic,
and snapshots of what the projections hold."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from kadence.connectors.visibility_sink import CLOSE_STATUS
from kadence.readmodels.history import HistoryReadModel
from kadence.readmodels.visibility import VisibilityFilter, VisibilityReader
from kadence.topics import Catalogue, KafkaConfig, decode
from kadence.topics.scan import scan
from kadence.topics.search_attributes import to_json


def redis_url() -> str:
    url = os.environ.get("KADENCE_REDIS_URL")
    assert url, "KADENCE_REDIS_URL is not set: run the tests with scripts/devstack.py"
    return url


class ProjectionProcs:
    """`kadence projections run` as child processes, so tests can SIGKILL them."""

    def __init__(self, config: KafkaConfig, logdir: Path):
        self.config, self.logdir = config, logdir
        self.procs: dict[str, subprocess.Popen] = {}
        self.starts = 0

    def start(self, instance_id: str = "v0") -> subprocess.Popen:
        self.starts += 1
        log = open(self.logdir / f"projection-{instance_id}-{self.starts}.log", "w")
        env = {
            **os.environ,
            "KADENCE_KAFKA_BOOTSTRAP": self.config.bootstrap,
            "KADENCE_NAMESPACE": self.config.namespace,
            "KADENCE_PROJECTION_ID": instance_id,
            "KADENCE_SESSION_TIMEOUT_MS": "10000",
            "KADENCE_REDIS_URL": redis_url(),
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "kadence.cli", "projections", "run"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        self.procs[instance_id] = proc
        return proc

    def kill(self, instance_id: str = "v0") -> None:
        proc = self.procs.pop(instance_id)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-4000:]}" for p in sorted(self.logdir.glob("projection-*.log")))

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()


def wait_history_quiet(config: KafkaConfig, quiet_s: float = 1.5, timeout: float = 60.0) -> None:
    """Wait until the history topic's end offsets have not moved for ``quiet_s``."""
    topic = Catalogue(config).history
    c = Consumer(config.consumer(None))
    try:
        parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while True:
            ends = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts]
            if ends != last:
                last, since = ends, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return
            assert time.monotonic() < deadline, "history topic never went quiet"
            time.sleep(0.25)
    finally:
        c.close()


def ground_truth(config: KafkaConfig) -> tuple[dict, dict]:
    """From the history topic: ``runs[(wf, run)]`` = the visibility record the projection must
    hold, and ``events[(wf, run)]`` = the run's events in seq order."""
    events: dict = {}
    for msg in scan(config, Catalogue(config).history):
        if msg.value() is None:
            continue
        ev = decode("HistoryEvent", msg.value())
        events.setdefault((ev["aggregate_key"], ev["run_id"]), []).append(ev)
    runs = {}
    for key, evs in events.items():
        evs.sort(key=lambda e: e["seq"])
        start = evs[0]["attributes"][1]
        rec = {
            "workflow_type": start["workflow_type"],
            "status": "running",
            "start_time_ms": evs[0]["timestamp_ms"],
            "close_time_ms": None,
            "search_attributes": to_json(start["search_attributes"]),
            "last_seq": evs[-1]["seq"],
        }
        for e in evs:
            kind, a = e["attributes"]
            if kind == "SearchAttributesUpserted":
                rec["search_attributes"].update(to_json(a["search_attributes"]))
            elif kind in CLOSE_STATUS:
                rec["status"], rec["close_time_ms"] = CLOSE_STATUS[kind], e["timestamp_ms"]
        runs[key] = rec
    return runs, events


FIELDS = ("workflow_type", "status", "start_time_ms", "close_time_ms", "search_attributes", "last_seq")


async def list_all(reader: VisibilityReader, page_size: int = 250, **filters) -> list[dict]:
    where = VisibilityFilter(**filters)
    items, cursor = await reader.list(where, page_size=page_size)
    while cursor:
        more, cursor = await reader.list(where, page_size=page_size, cursor=cursor)
        items += more
    return items


async def snapshot(redis, namespace: str, with_history: bool = True) -> dict:
    """Everything the projections answer: every record, the counters, each run's events."""
    reader = VisibilityReader(redis, namespace)
    records = {(r["workflow_id"], r["run_id"]): r for r in await list_all(reader, page_size=500)}
    out = {"records": records, "counts": await reader.count(), "latest": {}}
    for wf in {k[0] for k in records}:
        out["latest"][wf] = (await reader.describe(wf))["run_id"]
    if with_history:
        model = HistoryReadModel(redis, namespace)
        out["history"] = {k: (await model.read(k[0], k[1], limit=10_000)).events for k in records}
    return out


def mismatches(runs: dict, records: dict) -> list[str]:
    """What differs between the ground truth and the projection's records (empty: equal)."""
    out = []
    for key in runs.keys() - records.keys():
        out.append(f"missing {key}")
    for key in records.keys() - runs.keys():
        out.append(f"extra {key}")
    for key in runs.keys() & records.keys():
        want, got = runs[key], {f: records[key][f] for f in FIELDS}
        if want != got:
            out.append(f"{key}: want {want} got {got}")
    return out
