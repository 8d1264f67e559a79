"""Scenario 4: the raw Kafka limits of the same machine, in the same run.

* round trip: produce one record (linger 0, the engine's producer settings otherwise), wait
  until a consumer of the topic receives it, repeat; p50 of produce -> receive.
* transactional read-process-write loop, shaped like the history processor's: wait for a
  record, take whatever else is ready up to the batch size, begin a transaction, produce one
  output per input, ``send_offsets_to_transaction`` with the group metadata, commit. The batch
  size is the processor's mean batch in the three-activity throughput run (so both loops commit
  transactions of the same size); the input topic is filled beforehand with real encoded
  commands. msgs/s = input records per second. Also run at the processor's maximum batch (500).
"""

from __future__ import annotations

import asyncio
import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from kadence.topics import Catalogue, serde
from kadence.topics.records import command

from ..common import Context, CpuMeter, broker_process, summary

DEFAULT_BATCH = 20


def _topics(config, names: list[str], partitions: int) -> None:
    cat = Catalogue(config)
    admin = cat.admin()
    futures = admin.create_topics([NewTopic(n, partitions, config.replication) for n in names], operation_timeout=30)
    for fut in futures.values():
        fut.result(30)
    cat._wait_ready(admin, names, 30)


def round_trip(config, seconds: float) -> dict:
    topic = f"{config.namespace}.raw.rtt"
    _topics(config, [topic], 1)
    producer = Producer(config.producer(**{"linger.ms": 0}))
    consumer = Consumer(config.consumer(None, **{"fetch.wait.max.ms": 10}))
    consumer.assign([TopicPartition(topic, 0, 0)])
    value = b"x" * 200
    samples = []
    try:
        # warm: connections and the first fetch
        producer.produce(topic, value, b"warm")
        producer.flush(10)
        deadline = time.monotonic() + 10
        while consumer.poll(0.5) is None and time.monotonic() < deadline:
            pass
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.perf_counter()
            producer.produce(topic, value, b"k")
            producer.poll(0)
            while True:
                msg = consumer.poll(1.0)
                producer.poll(0)
                if msg is not None and not msg.error():
                    break
            samples.append((time.perf_counter() - t0) * 1000)
    finally:
        consumer.close()
        producer.flush(5)
    return summary(samples, 3)


def _fill(config, topic: str, n: int) -> None:
    producer = Producer(config.producer(**{"linger.ms": 5}))
    codec = serde.codec("Command")
    values = [
        codec.encode(
            command(
                f"wf-{i}",
                "StartWorkflow",
                {
                    "workflow_type": "ThreeActivities",
                    "task_queue": "bench",
                    "input": b"[1]",
                    "id_reuse_policy": "allow_duplicate",
                    "run_timeout_ms": None,
                    "search_attributes": {},
                },
                request_id=str(uuid.uuid4()),
            )
        )
        for i in range(256)
    ]
    for i in range(n):
        while True:
            try:
                producer.produce(topic, values[i % 256], f"wf-{i}".encode())
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)


def txn_hops(config, hops: int = 300) -> dict:
    """The floor of one engine hop: two transactional read-process-write loops (the processor's
    and the activity reporter's producer settings) pass one record back and forth; each hop
    consumes a record, produces the next in a transaction with the consumed offset
    (``send_offsets_to_transaction``) and commits, and the other side's read_committed consumer
    receives it. p50 of one hop (receive -> the other side receives), and of the transaction
    itself (begin -> commit returned)."""
    import threading

    tag = uuid.uuid4().hex[:6]
    topics = [f"{config.namespace}.raw.ping-{tag}", f"{config.namespace}.raw.pong-{tag}"]
    _topics(config, topics, 1)
    hop_ms: list[float] = []
    txn_ms: list[float] = []
    errors: list[str] = []
    go = threading.Barrier(2)
    received_at = [0.0]

    def side(me: int) -> None:
        src, dst = topics[me], topics[1 - me]
        producer = Producer(
            config.transactional_producer(
                f"{config.namespace}.raw.hop-{tag}-{me}",
                **{"transaction.timeout.ms": 10_000, "acks": "all", "retry.backoff.ms": 10},
            )
        )
        consumer = Consumer(config.consumer(f"{config.namespace}.raw.hop-{tag}-{me}"))
        try:
            producer.init_transactions(60)
            consumer.subscribe([src])
            while not consumer.assignment():
                consumer.poll(0.1)
            go.wait(60)

            def send(value: bytes, msg=None) -> None:
                t0 = time.perf_counter()
                producer.begin_transaction()
                producer.produce(dst, value)
                if msg is not None:
                    producer.send_offsets_to_transaction(
                        [TopicPartition(src, msg.partition(), msg.offset() + 1)], consumer.consumer_group_metadata(), 30
                    )
                producer.commit_transaction(30)
                txn_ms.append((time.perf_counter() - t0) * 1000)

            if me == 0:
                time.sleep(1.0)  # both consumers fetching
                received_at[0] = time.perf_counter()
                send(b"0")
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None or msg.error():
                    continue
                now = time.perf_counter()
                n = int(msg.value())
                hop_ms.append((now - received_at[0]) * 1000)
                received_at[0] = now
                if n + 1 >= hops:
                    if n + 1 == hops:
                        send(str(n + 1).encode(), msg)
                    return
                send(str(n + 1).encode(), msg)
        except Exception as exc:  # noqa: BLE001 - reported in the result
            errors.append(f"{type(exc).__name__}: {exc}")
            go.abort()
        finally:
            consumer.close()

    threads = [threading.Thread(target=side, args=(i,), daemon=True) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    if errors:
        return {"error": errors[0]}
    skip = min(20, len(hop_ms) // 4)  # warm-up: the first transactions register the partitions
    return {"hop_ms": summary(hop_ms[skip:], 2), "txn_ms": summary(txn_ms[skip:], 2)}


def txn_loop(config, batch: int, seconds: float, partitions: int, fill: int) -> dict:
    tag = uuid.uuid4().hex[:6]
    src, dst = f"{config.namespace}.raw.in-{tag}", f"{config.namespace}.raw.out-{tag}"
    _topics(config, [src, dst], partitions)
    _fill(config, src, fill)
    # the processor's transactional producer settings (its retry backoff too: without it a step
    # that meets the previous commit still completing waits 100 ms, which made this loop's small
    # batches slower per transaction than its large ones)
    producer = Producer(
        config.producer(
            **{
                "transactional.id": f"{config.namespace}.raw.{tag}",
                "transaction.timeout.ms": 10_000,
                "linger.ms": 1,
                "acks": "all",
                "retry.backoff.ms": 10,
            }
        )
    )
    producer.init_transactions(60)
    consumer = Consumer(
        config.consumer(
            f"{config.namespace}.raw.{tag}",
            **{
                "fetch.wait.max.ms": 20,
                "enable.auto.offset.store": False,
                "partition.assignment.strategy": "cooperative-sticky",
            },
        )
    )
    consumer.subscribe([src])
    processed = txns = 0
    commit_s = 0.0
    t_first = None
    try:
        end = None
        while True:
            first = consumer.poll(0.1)
            if first is None:
                if t_first is not None and processed >= fill:
                    break
                if end is not None and time.monotonic() >= end:
                    break
                continue
            if t_first is None:
                t_first = time.monotonic()
                end = t_first + seconds
            msgs = [first, *consumer.consume(num_messages=batch - 1, timeout=0)] if batch > 1 else [first]
            msgs = [m for m in msgs if m.error() is None]
            offsets = {}
            t0 = time.perf_counter()
            producer.begin_transaction()
            for m in msgs:
                while True:
                    try:
                        producer.produce(dst, m.value(), m.key(), partition=m.partition())
                        break
                    except BufferError:
                        producer.poll(0.01)
                offsets[(m.topic(), m.partition())] = m.offset() + 1
            producer.send_offsets_to_transaction(
                [TopicPartition(t, p, o) for (t, p), o in offsets.items()], consumer.consumer_group_metadata(), 30
            )
            producer.commit_transaction(30)
            commit_s += time.perf_counter() - t0
            processed += len(msgs)
            txns += 1
            if time.monotonic() >= end:
                break
        elapsed = time.monotonic() - (t_first or time.monotonic())
    except KafkaException as exc:
        return {"error": str(exc)}
    finally:
        consumer.close()
    return {
        "batch": batch,
        "msgs_per_s": round(processed / elapsed, 1) if elapsed else None,
        "transactions_per_s": round(txns / elapsed, 1) if elapsed else None,
        "mean_batch": round(processed / txns, 1) if txns else None,
        "mean_txn_ms": round(1000 * commit_s / txns, 2) if txns else None,
        "seconds": round(elapsed, 1),
        "input_exhausted": processed >= fill,
    }


async def run(ctx: Context) -> dict:
    from ..common import new_namespace

    s = ctx.settings
    task = ctx.task("raw_kafka")
    loop = asyncio.get_running_loop()
    config = await loop.run_in_executor(None, lambda: new_namespace(s, "raw", queues=()))
    tp = ctx.results.get("throughput", {}).get("three_activity", {})
    proc_batch = tp.get("mean_batch") if isinstance(tp, dict) else None
    batch = max(1, round(proc_batch)) if proc_batch else DEFAULT_BATCH
    import os

    cpu = CpuMeter({"broker": broker_process(config.bootstrap), "bench": os.getpid()})
    ctx.update(task, "produce -> consume round trips")
    rtt = await loop.run_in_executor(None, round_trip, config, max(3.0, s.seconds / 4))
    ctx.update(task, f"round trip p50 {rtt['p50']} ms; transactional hops")
    hops = await loop.run_in_executor(None, txn_hops, config)
    ctx.update(task, f"round trip p50 {rtt['p50']} ms; transactional loop at batch {batch}")
    seconds = max(3.0, s.seconds / 3)
    cpu.start()
    # enough input for the loop never to starve: generous for this machine's rates
    at_proc = await loop.run_in_executor(
        None, txn_loop, config, batch, seconds, s.partitions, int(min(400_000, max(20_000, batch * 400 * seconds)))
    )
    usage = cpu.stop()
    ctx.update(
        task,
        f"round trip p50 {rtt['p50']} ms; loop at batch {batch}: {at_proc.get('msgs_per_s')} msg/s; loop at batch 500",
    )
    at_max = await loop.run_in_executor(None, txn_loop, config, 500, seconds, s.partitions, 400_000)
    out = {
        "roundtrip_ms": rtt,
        "roundtrip_ms_p50": rtt["p50"],
        "txn_hop": hops,
        "txn_loop": at_proc,
        "txn_loop_batch500": at_max,
        "txn_loop_msgs_per_s": at_proc.get("msgs_per_s"),
        "batch_source": "throughput.three_activity.mean_batch" if proc_batch else f"default {DEFAULT_BATCH}",
        "cpu_percent_of_core_txn_loop": usage,
    }
    ctx.update(
        task,
        f"[green]round trip p50 {rtt['p50']} ms; txn loop {at_proc.get('msgs_per_s')} msg/s at batch "
        f"{batch}, {at_max.get('msgs_per_s')} msg/s at 500[/]",
    )
    return out
