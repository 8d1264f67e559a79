"""The topic catalogue on the real broker: `apply` creates the topics of docs/architecture.md ("Topics") with their
partition counts and cleanup policies, is idempotent, refuses a partition-count mismatch (API and
CLI), and records keyed by workflow ID land where ``partition_for`` says (murmur2)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from kadence.topics import TIMER_TIERS_MS, Catalogue, KafkaConfig, PartitionMismatchError, TopicSpec, partition_for
from tests.support.namespaces import drop_namespace

PARTITIONS = 3  # not the default (4): the counts must come from the configuration
KADENCE = Path(sys.executable).with_name("kadence")


@pytest.fixture
def fresh_config(kafka_bootstrap):
    """A namespace nobody has applied yet (dropped after the test)."""
    config = KafkaConfig(bootstrap=kafka_bootstrap, namespace=f"t{uuid.uuid4().hex[:10]}", partitions=PARTITIONS)
    yield config
    drop_namespace(config)


def _expected(ns: str) -> dict[str, str]:
    """topic -> cleanup.policy, from docs/architecture.md, "Topics"."""
    topics = {
        f"{ns}.commands": "delete",
        f"{ns}.history": "compact",
        f"{ns}.state": "compact",
        f"{ns}.replies": "delete",
        f"{ns}.dlq": "delete",
        f"{ns}.builds": "compact",  # the default worker build of each task queue (decision 0018)
        f"{ns}.queue_limits": "compact",  # each task queue's activity rate limits (decision 0055)
        f"{ns}.concurrency": "compact",  # each concurrency limit's holders and waiters (decision 0057)
        f"{ns}.streams": "delete",  # what workflows publish (decision 0062)
    }
    topics.update({f"{ns}.timers.{tier}": "delete" for tier in TIMER_TIERS_MS})
    return topics


def _partitions(admin: AdminClient, prefix: str) -> dict[str, int]:
    md = admin.list_topics(timeout=10)
    return {name: len(t.partitions) for name, t in md.topics.items() if name.startswith(prefix + ".")}


def _configs(admin: AdminClient, names) -> dict[str, dict[str, str]]:
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, n) for n in names])
    return {res.name: {k: e.value for k, e in fut.result(10).items()} for res, fut in futures.items()}


def test_apply_creates_every_topic_with_partitions_and_cleanup_policy(fresh_config):
    ns = fresh_config.namespace
    expected = _expected(ns)
    assert {f"{ns}.timers.{t}" for t in ("1s", "10s", "1m", "10m", "1h", "1d")} <= expected.keys()

    report = Catalogue(fresh_config).apply()

    assert sorted(report.created) == sorted(expected) and report.existing == [] and report.warnings == []
    admin = AdminClient(fresh_config.base())
    assert _partitions(admin, ns) == {name: PARTITIONS for name in expected}
    configs = _configs(admin, expected)
    for name, policy in expected.items():
        assert configs[name]["cleanup.policy"] == policy, name
    # commands keep a long retention (every input to a state machine); replies are short-lived
    assert int(configs[f"{ns}.commands"]["retention.ms"]) >= 7 * 86_400_000
    assert int(configs[f"{ns}.replies"]["retention.ms"]) < int(configs[f"{ns}.commands"]["retention.ms"])


def test_second_apply_creates_nothing(fresh_config):
    first = Catalogue(fresh_config).apply()
    again = Catalogue(fresh_config).apply()
    assert again.created == [] and again.warnings == []
    assert sorted(again.existing) == sorted(first.created)


def test_queue_topics_are_created_per_task_queue(fresh_config):
    cat = Catalogue(fresh_config)
    cat.apply()
    report = cat.ensure_queue("payments")
    ns = fresh_config.namespace
    lanes = [t for _l, t in cat.workflow_lanes("payments") + cat.activity_lanes("payments")]  # decision 0060
    assert sorted(report.created) == sorted(lanes)
    assert {
        f"{ns}.tasks.activity.payments",
        f"{ns}.tasks.workflow.payments",
        f"{ns}.tasks.activity-p1.payments",
    } <= set(lanes)
    assert cat.ensure_queue("payments").created == []
    configs = _configs(AdminClient(fresh_config.base()), report.created)
    assert {c["cleanup.policy"] for c in configs.values()} == {"delete"}


def test_apply_with_another_partition_count_is_refused(fresh_config):
    Catalogue(fresh_config).apply()
    other = KafkaConfig(bootstrap=fresh_config.bootstrap, namespace=fresh_config.namespace, partitions=PARTITIONS + 2)
    with pytest.raises(PartitionMismatchError) as info:
        Catalogue(other).apply()
    err = info.value
    assert err.topic in {f"{other.namespace}.{t}" for t in ("commands", "history", "state")}
    assert (err.expected, err.actual) == (PARTITIONS + 2, PARTITIONS)
    message = str(err)
    assert err.topic in message and f"{PARTITIONS} partitions" in message and str(PARTITIONS + 2) in message
    # nothing changed on the broker
    assert set(_partitions(AdminClient(fresh_config.base()), fresh_config.namespace).values()) == {PARTITIONS}


def test_mismatch_on_one_sharded_topic_creates_nothing(fresh_config):
    """A namespace whose history topic already has another count is refused before anything is
    created: no half-applied namespace."""
    ns = fresh_config.namespace
    admin = AdminClient(fresh_config.base())
    admin.create_topics([NewTopic(f"{ns}.history", PARTITIONS + 1, 1)])[f"{ns}.history"].result(30)
    deadline = time.monotonic() + 30  # the broker's metadata can lag a creation by a moment
    while f"{ns}.history" not in _partitions(admin, ns) and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(PartitionMismatchError) as info:
        Catalogue(fresh_config).apply()
    assert info.value.topic == f"{ns}.history"
    assert _partitions(admin, ns) == {f"{ns}.history": PARTITIONS + 1}


def _cli(config: KafkaConfig, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KADENCE_")}
    return subprocess.run(
        [str(KADENCE), "--bootstrap", config.bootstrap, "--namespace", config.namespace, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_topics_apply_is_idempotent_and_refuses_a_mismatch(fresh_config):
    ns = fresh_config.namespace
    first = _cli(fresh_config, "topics", "apply", "--partitions", str(PARTITIONS))
    assert first.returncode == 0, first.stderr
    assert f"created  {ns}.commands" in first.stdout and f"created  {ns}.history" in first.stdout
    assert _partitions(AdminClient(fresh_config.base()), ns) == {n: PARTITIONS for n in _expected(ns)}

    second = _cli(fresh_config, "topics", "apply", "--partitions", str(PARTITIONS))
    assert second.returncode == 0, second.stderr
    assert "created" not in second.stdout and f"exists   {ns}.commands" in second.stdout

    mismatch = _cli(fresh_config, "topics", "apply", "--partitions", str(PARTITIONS + 5))
    assert mismatch.returncode == 2, (mismatch.returncode, mismatch.stdout, mismatch.stderr)
    assert "Traceback" not in mismatch.stderr
    assert mismatch.stderr.startswith("error: ")
    assert f"{ns}.commands" in mismatch.stderr
    assert f"has {PARTITIONS} partitions" in mismatch.stderr and f"asks for {PARTITIONS + 5}" in mismatch.stderr
    assert "created" not in mismatch.stdout


def _keys() -> list[bytes]:
    """Workflow IDs as any client would send them: ASCII, non-ASCII UTF-8, raw bytes, and every
    byte length from 0 to 20 (murmur2 has separate paths for 4-byte blocks and 1-, 2-, 3-byte tails)."""
    # Empty keys are included: librdkafka's murmur2_random randomises only NULL keys, and an empty
    # (non-NULL) key hashes like the Java client's empty byte array. The length-0 loop below adds a
    # dozen of them, so random placement could not pass by chance.
    rnd = random.Random(20240607)
    alphabet = "abcXYZ019-_/.:é漢字😀Ωß"
    keys = [b"", b"a", b"order-1", "workflow-é".encode(), "注文-42".encode(), "😀".encode(), bytes(range(20))]
    for length in range(21):
        for _ in range(6):
            keys.append(bytes(rnd.randrange(256) for _ in range(length)))
            keys.append("".join(rnd.choice(alphabet) for _ in range(length)).encode())
    return keys


def test_records_keyed_by_workflow_id_land_on_partition_for(fresh_config):
    topic = f"{fresh_config.namespace}.murmur"
    Catalogue(fresh_config).apply([TopicSpec(topic, 7)])
    keys = _keys()
    assert set(range(21)) <= {len(k) for k in keys}
    landed: list[tuple[bytes, int]] = []
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            landed.append((msg.key(), msg.partition()))

    producer = Producer(fresh_config.producer())
    for i, key in enumerate(keys):
        producer.produce(topic, value=str(i).encode(), key=key, on_delivery=on_delivery)
    assert producer.flush(30) == 0 and errors == []
    assert len(landed) == len(keys)
    wrong = [(k, p, partition_for(k, 7)) for k, p in landed if p != partition_for(k, 7)]
    assert wrong == [], f"{len(wrong)} of {len(keys)} records landed elsewhere than partition_for: {wrong[:5]}"
    assert len({p for _, p in landed}) == 7  # the keys spread over every partition


def test_murmur2_matches_the_java_client():
    """Values from Kafka's own tests of org.apache.kafka.common.utils.Utils.murmur2."""
    from kadence.topics import murmur2

    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107
    assert partition_for("foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7
