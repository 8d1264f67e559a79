"""The timer service on the real broker (docs/architecture.md, "Timers").

The tests produce TimerRecords to the delay tier ``choose_tier(fire_at - now)`` as the history
processor does, run the service (as a `kadence timers` subprocess, or in a thread where its memory
is inspected) and read the FireTimer commands back from ``{ns}.commands``.
"""

from __future__ import annotations

import random
import statistics
import threading
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from prometheus_client import CollectorRegistry

from kadence.processors import TimerConfig, TimerService, choose_tier
from kadence.topics import TIMER_TIERS_MS, Catalogue, KafkaConfig, partition_for, serde
from kadence.topics.records import now_ms
from tests.integration.invariants import read_topic
from tests.integration.wedged_producer import first_wedged

DAY_MS = 86_400_000


@pytest.fixture
def timers(processors, request):
    """The processes fixture, printing the timer service's logs when the test failed."""
    yield processors
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        for path in sorted(processors.logdir.glob("timers-*.log")):
            print(f"--- {path.name}\n{path.read_text()[-6000:]}")


def wait_for_log(procs, text: str, count: int = 1, timeout: float = 30.0) -> None:
    """Wait until ``text`` occurs ``count`` times in the timer services' logs."""
    deadline = time.monotonic() + timeout
    while True:
        seen = sum(p.read_text().count(text) for p in procs.logdir.glob("timers-*.log"))
        if seen >= count:
            return
        for name, proc in procs.procs.items():
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {text!r} x{count} in the timer service log")
        time.sleep(0.05)


def timer(workflow_id: str, timer_id: str, fire_at_ms: int) -> dict:
    return {
        "workflow_id": workflow_id,
        "run_id": "run-1",
        "timer_id": timer_id,
        "fire_at_ms": fire_at_ms,
        "kind": "user",
        "scheduled_seq": 7,
        "attempt": 1,
    }


def warm_producer(config: KafkaConfig) -> Producer:
    """The idempotent producer's first delivery waits ~0.5 s for its producer ID; warm it up (on a
    topic nobody reads here) so that enqueue times are when the records really leave."""
    producer = Producer(config.producer())
    producer.produce(Catalogue(config).replies, b"warm-up", b"warm-up")
    assert producer.flush(10) == 0
    return producer


def produce_timers(config: KafkaConfig, records: list[dict], acked: dict | None = None) -> dict[str, int]:
    """Produce each record to its tier as the processor would; timer_id -> enqueue time (ms).
    ``acked`` (if given) gets timer_id -> when Kafka acknowledged it (when the service can see it)."""
    topics = Catalogue(config)
    producer = warm_producer(config)
    codec = serde.codec("TimerRecord")
    encoded = [(rec, codec.encode(rec), rec["workflow_id"].encode()) for rec in records]
    enqueued = {}

    def delivered(err, msg, timer_id):
        assert err is None, err
        if acked is not None:
            acked[timer_id] = now_ms()

    for rec, value, key in encoded:
        now = now_ms()
        while True:
            try:
                producer.produce(
                    topics.timers(choose_tier(rec["fire_at_ms"] - now)),
                    value,
                    key,
                    timestamp=now,
                    on_delivery=lambda err, msg, t=rec["timer_id"]: delivered(err, msg, t),
                )
                break
            except BufferError:
                producer.poll(0.05)
        enqueued[rec["timer_id"]] = now
        producer.poll(0)  # serve delivery reports as they come, so ``acked`` is accurate
    assert producer.flush(30) == 0
    return enqueued


class Fires:
    """Reads FireTimer commands from {ns}.commands (read_committed) as they arrive."""

    def __init__(self, config: KafkaConfig):
        self.topic = Catalogue(config).commands
        self.consumer = Consumer(config.consumer(None))
        md = self.consumer.list_topics(self.topic, timeout=10).topics[self.topic]
        self.consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in md.partitions])
        self.codec = serde.codec("Command")
        #: timer_id -> [(kafka timestamp, key, command)]
        self.fired: dict[str, list] = {}

    def _drain(self, timeout: float) -> int:
        n = 0
        for msg in self.consumer.consume(1000, timeout=timeout):
            if msg.error():
                continue
            cmd = self.codec.decode(msg.value())
            kind, body = cmd["body"]
            assert kind == "FireTimer"
            self.fired.setdefault(body["timer_id"], []).append((msg.timestamp()[1], msg.key(), cmd))
            n += 1
        return n

    def collect(self, expected: set[str], timeout: float, settle: float = 1.5) -> None:
        """Read until every expected timer fired (or timeout), then ``settle`` s more for duplicates."""
        deadline = time.monotonic() + timeout
        while not expected <= self.fired.keys() and time.monotonic() < deadline:
            self._drain(0.2)
        end = time.monotonic() + settle
        while time.monotonic() < end:
            self._drain(0.2)

    def close(self) -> None:
        self.consumer.close()


def check_fires(fires: Fires, records: list[dict]) -> int:
    """Every timer fired, none early, with the right command; returns the number of duplicates."""
    missing = [r["timer_id"] for r in records if r["timer_id"] not in fires.fired]
    assert not missing, f"{len(missing)} timers never fired, e.g. {missing[:5]}"
    early = []
    for r in records:
        for ts, key, cmd in fires.fired[r["timer_id"]]:
            if ts < r["fire_at_ms"]:
                early.append((r["timer_id"], r["fire_at_ms"] - ts))
            assert key == r["workflow_id"].encode() and cmd["aggregate_key"] == r["workflow_id"]
            assert cmd["run_id"] == r["run_id"]
            assert cmd["body"][1] == {
                "timer_id": r["timer_id"],
                "fire_at_ms": r["fire_at_ms"],
                "kind": "user",
                "scheduled_seq": 7,
                "attempt": 1,
            }
    assert not early, f"{len(early)} timers fired early (timer, ms early): {early[:5]}"
    return sum(len(v) - 1 for v in fires.fired.values())


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def test_ten_thousand_mixed_timers_fire_on_time_and_never_early(timers, kafka_config):
    timers.start_timers()
    wait_for_log(timers, "assigned")
    fires = Fires(kafka_config)
    rng = random.Random(20261129)
    base = now_ms() + 300
    records = []
    for i in range(10_000):
        if i % 20 == 0:
            delay = -rng.randint(0, 3_000)  # already past due
        else:
            delay = rng.randint(0, 15_000)  # 1s tier, or 10s tier (re-enqueued to 1s)
        records.append(timer(f"wf-{i % 1_000}", f"t-{i}", base + delay))
    acked: dict[str, int] = {}
    t0 = time.monotonic()
    enqueued = produce_timers(kafka_config, records, acked)
    produced_s = time.monotonic() - t0
    try:
        fires.collect({r["timer_id"] for r in records}, timeout=45)
        duplicates = check_fires(fires, records)
    finally:
        fires.close()
    first = {r["timer_id"]: fires.fired[r["timer_id"]][0][0] for r in records}
    # lateness: fire time minus due time, for the timers not yet due when enqueued
    late = [
        (first[r["timer_id"]] - r["fire_at_ms"]) / 1000 for r in records if r["fire_at_ms"] > enqueued[r["timer_id"]]
    ]
    # the service's own part: from when it could first have fired the timer, i.e. when it was due
    # and Kafka had acknowledged it to the producer (a timer cannot fire before it is in Kafka)
    own = [
        (first[r["timer_id"]] - max(r["fire_at_ms"], acked[r["timer_id"]])) / 1000
        for r in records
        if r["fire_at_ms"] > enqueued[r["timer_id"]]
    ]
    # timers due once the burst of 10,000 is in Kafka and ingested: the precision of the near heap
    settled = max(acked.values()) + 1_000
    steady = [(first[r["timer_id"]] - r["fire_at_ms"]) / 1000 for r in records if r["fire_at_ms"] >= settled]
    # timers already due when enqueued: how long after Kafka had them they fired
    overdue = [
        (first[r["timer_id"]] - acked[r["timer_id"]]) / 1000
        for r in records
        if r["fire_at_ms"] <= enqueued[r["timer_id"]]
    ]
    tier10 = sum(1 for r in records if choose_tier(r["fire_at_ms"] - enqueued[r["timer_id"]]) == "10s")
    ack_lag = sorted(acked[t] - enqueued[t] for t in enqueued)
    print(
        f"\n10k timers: produced in {produced_s:.2f}s (ack p50 {ack_lag[len(ack_lag) // 2]} ms, "
        f"max {ack_lag[-1]} ms); {tier10} via the 10s tier, {len(overdue)} overdue when enqueued"
    )
    print(
        f"  lateness (fire - due):           p50 {statistics.median(late) * 1000:.1f} ms, "
        f"p99 {pct(late, 0.99) * 1000:.1f} ms, max {max(late) * 1000:.1f} ms"
    )
    print(
        f"  lateness of the {len(steady)} due 1 s after the burst: p50 {statistics.median(steady) * 1000:.1f} ms, "
        f"p99 {pct(steady, 0.99) * 1000:.1f} ms, max {max(steady) * 1000:.1f} ms"
    )
    print(
        f"  service lateness (fire - max(due, acked)): p50 {statistics.median(own) * 1000:.1f} ms, "
        f"p99 {pct(own, 0.99) * 1000:.1f} ms, max {max(own) * 1000:.1f} ms"
    )
    print(
        f"  overdue when enqueued, fired after the ack: p50 {statistics.median(overdue) * 1000:.1f} ms, "
        f"p99 {pct(overdue, 0.99) * 1000:.1f} ms; duplicates {duplicates}"
    )
    assert duplicates == 0
    # Lateness is measured by `make bench` (target p99 < 100 ms), not asserted here: a timed
    # assertion on a shared 2-core machine would test the machine's load. This test guards
    # correctness (none early, none lost, none twice) and a loose bound that only a broken
    # near window (timers waiting for their tier's delay) would exceed.
    assert pct(late, 0.99) < 5.0, "timers wait far past their due time: the near window is broken"
    timers.stop_timers()


def test_far_future_timers_hold_one_record_per_partition(kafka_config):
    """20,000 timers two days out: the service holds one of them per partition, not 20,000."""
    ns = kafka_config.namespace
    registry = CollectorRegistry()
    service = TimerService(
        TimerConfig(kafka=kafka_config, instance_id="mem", session_timeout_ms=6000), registry=registry
    )
    thread = threading.Thread(target=service.run, name="timer-service", daemon=True)
    thread.start()
    fires = Fires(kafka_config)
    try:
        assert service.ready.wait(30), "timer service got no partitions"
        now = now_ms()
        far = [timer(f"far-{i % 500}", f"far-{i}", now + 2 * DAY_MS + i) for i in range(20_000)]
        produce_timers(kafka_config, far)
        near = [timer(f"near-{i}", f"near-{i}", now_ms() + 1_000 + 50 * i) for i in range(40)]
        produce_timers(kafka_config, near)
        far_partitions = {partition_for(r["workflow_id"], kafka_config.partitions) for r in far}

        max_near = max_heads = 0
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            fires._drain(0.05)
            max_near = max(
                max_near, registry.get_sample_value("kadence_timers_held_records", {"namespace": ns, "where": "near"})
            )
            max_heads = max(
                max_heads, registry.get_sample_value("kadence_timers_held_records", {"namespace": ns, "where": "head"})
            )
            if {r["timer_id"] for r in near} <= fires.fired.keys() and max_heads >= len(far_partitions):
                break
        time.sleep(0.6)  # one more gauge interval, then read it again
        fires._drain(0.2)
        heads_now = registry.get_sample_value("kadence_timers_held_records", {"namespace": ns, "where": "head"})
        print(
            f"\nfar-future: gauge max near {max_near:.0f}, max heads {max_heads:.0f}; "
            f"peak near {service.peak_near}, peak heads {service.peak_heads}; "
            f"held now {service.held()}"
        )
        assert check_fires(fires, near) == 0
        assert not [t for t in fires.fired if t.startswith("far-")], "a far-future timer fired"
        # the memory bound: at most one far record per partition (one head per 1d partition with
        # timers), plus the near window; never anything like the 20,000 pending timers
        assert service.peak_heads <= len(far_partitions) and max_heads <= len(far_partitions)
        assert service.peak_near <= len(near)
        assert heads_now == len(far_partitions) == service.held()[1]  # it did read every far partition
        assert service.reenqueued == 0 and service.fired == len(near)
    finally:
        fires.close()
        service.stop()
        thread.join(30)
    assert not thread.is_alive(), "the service did not stop"


def test_restarts_graceful_and_sigkill_every_timer_still_fires(timers, kafka_config):
    """SIGTERM mid-way: nothing fires twice. SIGKILL mid-way: everything still fires (at-least-once)."""
    timers.start_timers()
    wait_for_log(timers, "assigned")
    fires = Fires(kafka_config)
    rng = random.Random(5)
    base = now_ms() + 200
    records = [timer(f"wf-{i % 300}", f"r-{i}", base + rng.randint(0, 8_000)) for i in range(3_000)]
    records += [timer(f"wf-{i % 300}", f"r10-{i}", base + rng.randint(10_000, 11_500)) for i in range(300)]
    produce_timers(kafka_config, records)

    def drain() -> set[str]:
        while fires._drain(0.3):
            pass
        return set(fires.fired)

    try:
        time.sleep(2.5)
        timers.stop_timers()
        before_stop = drain()
        timers.start_timers()
        wait_for_log(timers, "assigned", count=2)
        time.sleep(2.5)
        timers.kill_timers()
        before_kill = drain()
        time.sleep(1)  # timers fall due while no service runs
        timers.start_timers()
        wait_for_log(timers, "assigned", count=3)
        fires.collect({r["timer_id"] for r in records}, timeout=40)
        duplicates = check_fires(fires, records)
    finally:
        fires.close()
    twice_after_stop = [t for t in before_stop if len(fires.fired[t]) > 1]
    print(
        f"\nrestarts: {len(before_stop)} fired before SIGTERM, {len(twice_after_stop)} of them again; "
        f"{len(before_kill)} fired before SIGKILL; {duplicates} fired twice in all (at-least-once)"
    )
    assert 0 < len(before_stop) < len(before_kill) < len(records)
    assert not twice_after_stop, "a graceful stop must hand over without firing anything twice"
    timers.stop_timers()


def test_poison_records_go_to_the_dlq_and_the_partition_keeps_moving(timers, kafka_config):
    topics = Catalogue(kafka_config)
    timers.start_timers()
    wait_for_log(timers, "assigned")
    fires = Fires(kafka_config)
    key = b"wf-poison"
    producer = warm_producer(kafka_config)
    codec = serde.codec("TimerRecord")
    now = now_ms()
    producer.produce(topics.timers("1s"), b"\x00not avro at all", key)
    producer.produce(topics.timers("10s"), b"K\x01\xff\xff", key)  # right magic, garbage body
    # good timers behind them on the same partitions; the 10s one has waited its tier's delay already
    ok_near = timer("wf-poison", "after-poison-1s", now + 500)
    ok_far = timer("wf-poison", "after-poison-10s", now + 800)
    producer.produce(topics.timers("1s"), codec.encode(ok_near), key)
    producer.produce(topics.timers("10s"), codec.encode(ok_far), key, timestamp=now - 10_000)
    assert producer.flush(10) == 0
    try:
        fires.collect({"after-poison-1s", "after-poison-10s"}, timeout=20, settle=0.5)
        assert check_fires(fires, [ok_near, ok_far]) == 0
    finally:
        fires.close()
    deadline = time.monotonic() + 10
    while True:
        dead = [v for _k, v, _p, _o in read_topic(kafka_config, topics.dlq, "DeadLetter")]
        if len(dead) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(dead) == 2
    assert {d["origin_topic"] for d in dead} == {topics.timers("1s"), topics.timers("10s")}
    partition = partition_for("wf-poison", kafka_config.partitions)
    for d in dead:
        assert d["origin_partition"] == partition and d["origin_offset"] == 0
        assert d["key"] == key and d["component"] == "timer-service"
        assert d["reason"].startswith("undecodable timer record") and d["error_type"] == "SchemaError"
    assert {d["value"] for d in dead} == {b"\x00not avro at all", b"K\x01\xff\xff"}
    timers.stop_timers()


def test_every_far_tier_matures_its_head_and_moves_it_down(timers, kafka_config):
    """Records that have already waited their tier's delay (backdated CreateTime, as after an
    outage) mature at once: fired if due, else re-enqueued to a finer tier; a record put on too
    coarse a tier still fires on time."""
    topics = Catalogue(kafka_config)
    timers.start_timers()
    wait_for_log(timers, "assigned")
    fires = Fires(kafka_config)
    producer = warm_producer(kafka_config)
    codec = serde.codec("TimerRecord")
    now = now_ms()
    records = []
    for n, (tier, delay) in enumerate(sorted(TIMER_TIERS_MS.items(), key=lambda kv: kv[1])):
        if tier == "1s":
            continue
        for k in range(5):
            due = timer(f"wf-{tier}-{k}", f"{tier}-due-{k}", now - 500)  # matured and overdue
            soon = timer(f"wf-{tier}-{k}", f"{tier}-soon-{k}", now + 1_500 + 100 * n)  # matured, not yet due
            for rec in (due, soon):
                producer.produce(
                    topics.timers(tier), codec.encode(rec), rec["workflow_id"].encode(), timestamp=now - delay
                )
            records += [due, soon]
    misrouted = timer("wf-misrouted", "misrouted", now + 1_000)  # a day's tier for a timer due in 1 s
    producer.produce(topics.timers("1d"), codec.encode(misrouted), b"wf-misrouted", timestamp=now)
    records.append(misrouted)
    assert producer.flush(10) == 0
    try:
        fires.collect({r["timer_id"] for r in records}, timeout=20, settle=0.5)
        assert check_fires(fires, records) == 0
    finally:
        fires.close()
    late = max(fires.fired[r["timer_id"]][0][0] - max(r["fire_at_ms"], now) for r in records)
    print(f"\nbacklogged tiers: {len(records)} timers fired, max {late} ms after due")
    assert late < 500
    timers.stop_timers()


def test_a_wedged_producer_is_replaced_and_its_timers_fire(kafka_config):
    factory, made = first_wedged()
    service = TimerService(
        TimerConfig(kafka=kafka_config, instance_id="wedge", session_timeout_ms=6000, producer_stall_s=2.0),
        producer_factory=factory,
    )
    thread = threading.Thread(target=service.run, name="timer-service", daemon=True)
    thread.start()
    fires = Fires(kafka_config)
    try:
        assert service.ready.wait(30), "timer service got no partitions"
        records = [timer(f"wedge-{i}", f"wedge-{i}", now_ms() + 300) for i in range(5)]
        produce_timers(kafka_config, records)
        fires.collect({r["timer_id"] for r in records}, timeout=30, settle=0.5)
        assert check_fires(fires, records) == 0  # each fired, none early, none twice
        assert len(made) == 2 and made[0].taken == 5  # taken by the wedged one, sent by its successor
    finally:
        fires.close()
        service.stop()
        thread.join(30)
    assert not thread.is_alive(), "the service did not stop"
