"""A bridge started while the broker is down waits for it, and one that meets a broker restart
goes on (issue 16, item 3): before, its first topic check exited it (``cannot list topics``), and
a batch whose commands were not acknowledged during a restart made it exit on the committed-offset
read of its rewind (``NOT_COORDINATOR``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid

from confluent_kafka import KafkaError, KafkaException, Producer

from kadence.topics import Catalogue, KafkaConfig, TopicSpec, serde
from tests.integration.conftest import wait_until
from tests.integration.invariants import read_topic

CONFIG = """
[bridge]
name = "orders"

[[mappings]]
topic = "{source}"
action = "start"
workflow_type = "FulfilOrder"
task_queue = "orders"
workflow_id_field = "order_id"
workflow_id_prefix = "order-"
"""


def _produce(config: KafkaConfig, topic: str, ids: range) -> None:
    producer = Producer(config.producer())
    for i in ids:
        producer.produce(topic, json.dumps({"order_id": i}).encode(), str(i).encode())
    assert producer.flush(60) == 0


#: what a read meets while a restarted broker's partitions elect their leaders
_SETTLING = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError._TRANSPORT}


def _started(config: KafkaConfig) -> set[str]:
    """The workflow IDs of the start commands on the commands topic (a redelivered record's
    command is there twice: the processor deduplicates it by request ID). None seen while the
    restarted broker's partitions have no leader yet (this read is the test's, not the bridge's:
    CI once met NOT_LEADER_FOR_PARTITION here right after the broker came back)."""
    try:
        records = read_topic(config, Catalogue(config).commands)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        if isinstance(err, KafkaError) and (err.retriable() or err.code() in _SETTLING):
            return set()
        raise
    return {serde.decode("Command", v)["aggregate_key"] for _k, v, _p, _o in records}


async def test_a_bridge_waits_for_the_broker_and_rides_out_its_restart(own_broker, tmp_path):
    config = KafkaConfig(bootstrap=own_broker.bootstrap, namespace=f"b{uuid.uuid4().hex[:10]}", partitions=2)
    source = f"{config.namespace}-orders.created"
    Catalogue(config).apply()
    Catalogue(config).apply([TopicSpec(source, 2)])
    _produce(config, source, range(20))
    path = tmp_path / "orders.toml"
    path.write_text(CONFIG.format(source=source))
    log = tmp_path / "bridge.log"
    own_broker.stop()
    env = {**os.environ, "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap, "KADENCE_NAMESPACE": config.namespace}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kadence.cli", "bridges", "run", "--config", str(path)],
        env=env,
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
    )
    try:
        await wait_until(lambda: "waiting for the broker" in log.read_text(), 60, "the bridge waiting for the broker")
        assert proc.poll() is None, log.read_text()[-3000:]
        own_broker.start()
        want = {f"order-{i}" for i in range(20)}
        await wait_until(lambda: want <= _started(config), 120, "the first 20 starts forwarded")
        own_broker.restart()
        _produce(config, source, range(20, 40))
        want = {f"order-{i}" for i in range(40)}
        await wait_until(lambda: want <= _started(config), 120, "the 20 records produced after the restart forwarded")
        assert _started(config) == want
        assert proc.poll() is None, f"the bridge exited:\n{log.read_text()[-3000:]}"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        rc = proc.wait(30)
    assert rc == 0, log.read_text()[-3000:]
