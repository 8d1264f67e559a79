"""Inbound bridges on the real broker: domain records become starts and signals, once each, however
often the records are delivered; bad records go to the dead-letter topic with the reason."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading

from confluent_kafka import Consumer, Producer, TopicPartition

from kadence.connectors.bridges import Bridge, load_bridge_config
from kadence.topics import Catalogue, TopicSpec
from kadence.topics.dead_letters import list_dead_letters
from kadence.topics.history_reader import read_runs
from tests.support.metrics import sample_value
from tests.support.net import free_port

from .conftest import wait_until
from .wedged_producer import first_wedged

N = 1000
CONFIG = """
[bridge]
name = "{name}"

[[mappings]]
topic = "{created}"
action = "start"
workflow_type = "FulfilOrder"
task_queue = "orders"
workflow_id_field = "order_id"
workflow_id_prefix = "order-"

[[mappings]]
topic = "{shipped}"
action = "signal"
signal = "shipped"
workflow_id_field = "order_id"
workflow_id_prefix = "order-"
input_field = "tracking"
request_id_field = "event_id"
"""


def _create_topics(config, *names: str) -> None:
    Catalogue(config).apply([TopicSpec(n, 3) for n in names])


def _produce(config, topic: str, values: list[bytes]) -> None:
    producer = Producer(config.producer())
    for i, value in enumerate(values):
        producer.produce(topic, value, str(i).encode())
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def _lag(config, group: str, topics: list[str]) -> int:
    """Records of ``topics`` that ``group`` has not committed yet."""
    consumer = Consumer(config.consumer(group))
    try:
        tps = [TopicPartition(t, p) for t in topics for p in consumer.list_topics(t, timeout=10).topics[t].partitions]
        lag = 0
        for tp in consumer.committed(tps, timeout=10):
            _low, high = consumer.get_watermark_offsets(tp, timeout=10)
            lag += high - max(tp.offset, 0)
        return lag
    finally:
        consumer.close()


def _metric(port: int, name: str, **labels) -> float:
    value = sample_value(port, name, **labels)
    assert value is not None, f"no {name}{labels} in the metrics"
    return value


class BridgeProc:
    def __init__(self, config, path, logdir, metrics_port):
        self.config, self.path, self.logdir, self.metrics_port = config, path, logdir, metrics_port
        self.proc = None

    def __enter__(self):
        env = {
            **os.environ,
            "KADENCE_KAFKA_BOOTSTRAP": self.config.bootstrap,
            "KADENCE_NAMESPACE": self.config.namespace,
        }
        self.log = self.logdir / f"bridge-{self.path.stem}.log"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kadence.cli",
                "bridges",
                "run",
                "--config",
                str(self.path),
                "--metrics-port",
                str(self.metrics_port),
            ],
            env=env,
            stdout=open(self.log, "w"),
            stderr=subprocess.STDOUT,
        )
        return self

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(30)
        assert rc == 0, self.log.read_text()[-3000:]


async def test_bridge_fed_the_same_records_twice_starts_each_workflow_once(processors, kafka_config, tmp_path):
    processors.start()
    ns = kafka_config.namespace
    created, shipped = f"{ns}-orders.created", f"{ns}-orders.shipped"
    _create_topics(kafka_config, created, shipped)
    orders = [json.dumps({"order_id": i, "items": [i % 7], "total_cents": 100 * i}).encode() for i in range(N)]
    bad = [b"not json at all", json.dumps({"no_order_id": 1}).encode(), json.dumps([1, 2]).encode()]
    _produce(kafka_config, created, orders + bad)
    _produce(kafka_config, created, orders)  # the same 1,000 records again, at new offsets
    shipments = [json.dumps({"order_id": i, "tracking": f"T{i}", "event_id": f"ship-{i}"}).encode() for i in range(10)]
    _produce(kafka_config, shipped, shipments * 2)  # each shipment delivered twice

    topics = Catalogue(kafka_config)
    for name in ("orders", "orders-replay"):  # the second bridge replays both topics from the start
        path = tmp_path / f"{name}.toml"
        path.write_text(CONFIG.format(name=name, created=created, shipped=shipped))
        port = free_port()
        with BridgeProc(kafka_config, path, tmp_path, port):
            await wait_until(
                lambda name=name: _lag(kafka_config, f"{ns}.bridge.{name}", [created, shipped]) == 0,
                120,
                f"bridge {name} to forward every record",
            )
            counts = {
                (topic, outcome): _metric(port, "kadence_bridge_records_total", topic=topic, outcome=outcome)
                for topic, outcome in (
                    (created, "StartWorkflow"),
                    (created, "dead_lettered"),
                    (shipped, "SignalWorkflow"),
                )
            }
            assert counts == {
                (created, "StartWorkflow"): 2 * N,
                (created, "dead_lettered"): len(bad),
                (shipped, "SignalWorkflow"): 20,
            }
        await wait_until(
            lambda: _lag(kafka_config, topics.processor_group, [topics.commands]) == 0,
            120,
            "the processor to take every command",
        )

    runs = read_runs(kafka_config, closed_only=False)
    starts = collections.Counter(events[0]["aggregate_key"] for events in runs)
    assert len(starts) == N and set(starts.values()) == {1}
    assert set(starts) == {f"order-{i}" for i in range(N)}
    by_wf = {events[0]["aggregate_key"]: events for events in runs}
    first = by_wf["order-3"][0]
    assert first["attributes"][0] == "WorkflowExecutionStarted"
    assert first["attributes"][1]["workflow_type"] == "FulfilOrder"
    assert json.loads(first["attributes"][1]["input"]) == [{"order_id": 3, "items": [3], "total_cents": 300}]
    for i in range(N):
        signals = [e for e in by_wf[f"order-{i}"] if e["attributes"][0] == "WorkflowSignaled"]
        assert len(signals) == (1 if i < 10 else 0), f"order-{i}: {len(signals)} signals"
        if signals:
            assert json.loads(signals[0]["attributes"][1]["input"]) == [f"T{i}"]

    # bad records: dead-lettered with the reason and origin, once per bridge that read them
    dead = [d.record for d in list_dead_letters(kafka_config)]
    assert len(dead) == 2 * len(bad)
    assert {d["component"] for d in dead} == {"bridge:orders", "bridge:orders-replay"}
    assert {d["value"] for d in dead} == set(bad)
    assert all(d["origin_topic"] == created for d in dead)
    reasons = " | ".join(d["reason"] for d in dead)
    assert "not JSON" in reasons and "'order_id' is missing" in reasons and "not a JSON object" in reasons


async def test_a_bridge_whose_producer_wedges_replaces_it_and_forwards_every_record_once(
    processors, kafka_config, tmp_path
):
    """librdkafka #5430: a producer that takes the batch and sends none of it. The bridge used to
    queue its retry behind the stuck records for good; now the flush that fails retires the
    producer and the retry goes through a new one."""
    processors.start()
    ns = kafka_config.namespace
    created, shipped = f"{ns}-wedge.created", f"{ns}-wedge.shipped"
    _create_topics(kafka_config, created, shipped)
    n = 20
    _produce(kafka_config, created, [json.dumps({"order_id": i}).encode() for i in range(n)])
    path = tmp_path / "wedge.toml"
    path.write_text(CONFIG.format(name="wedge", created=created, shipped=shipped))
    factory, made = first_wedged()
    bridge = Bridge(load_bridge_config(path, kafka_config), producer_factory=factory)
    thread = threading.Thread(target=bridge.run, name="bridge", daemon=True)
    thread.start()
    try:
        await wait_until(
            lambda: _lag(kafka_config, f"{ns}.bridge.wedge", [created]) == 0, 60, "the bridge to forward every record"
        )
    finally:
        bridge.stop()
        thread.join(30)
    assert not thread.is_alive()
    assert len(made) == 2 and made[0].taken >= 1 and made[0].purged  # the wedged one took a batch, was retired
    assert bridge.forwarded == n
    topics = Catalogue(kafka_config)
    await wait_until(
        lambda: _lag(kafka_config, topics.processor_group, [topics.commands]) == 0,
        60,
        "the processor to take every command",
    )
    starts = collections.Counter(events[0]["aggregate_key"] for events in read_runs(kafka_config, closed_only=False))
    assert starts == {f"order-{i}": 1 for i in range(n)}
