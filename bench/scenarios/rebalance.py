"""Scenario: many instances and rebalances under load (issue 43): how long each shard goes
unserved when a processor is SIGKILLed, when every processor is restarted gracefully one after
another, and when a processor is added and removed.

The scenario starts a three-node cluster of its own (``kadence.devstack.cluster.KafkaCluster``,
PLAINTEXT), a namespace of ``KADENCE_BENCH_REBALANCE_PARTITIONS`` partitions (12) at RF 3, three
processors, three timer services and four workers, and keeps 3-activity workflows in flight
(``KADENCE_BENCH_REBALANCE_CONCURRENCY``, 64). ``kadence.testing.PartitionProbes`` asks every
commands partition every 0.2 s; for each event the result holds, per partition, the
longest time without an answer from the event's start to the first answer after its end:

- ``sigkill``: one processor SIGKILLed and started again at once with the same instance ID (a
  supervisor's restart; the group waits out the session timeout, ``KADENCE_BENCH_SESSION_TIMEOUT_MS``,
  6 s here, 10 s by default); target: under 10 s;
- ``rolling_restart``: each processor in turn stopped with SIGTERM and started again, the next
  once the restarted one has its partitions; target: under 2 s per partition;
- ``scale_up`` / ``scale_down``: a fourth processor added, then stopped with SIGTERM;
- ``control_start_elsewhere``: a processor started in another namespace (the same start-up
  work, no partition of this group moves): what starting a process costs the others on a
  machine whose two cores the brokers and the engine share.

No engine process may exit on its own. Workflows completed and errors over the whole run are
reported too."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import time

from .. import workloads
from ..common import Context, Procs, new_namespace, own_cluster, session_timeout_ms
from ..load import Recorder, closed_loop

SIGKILL_TARGET_S = 10.0
#: the KIP-848 run's member heartbeat (librdkafka's classic default, 3 s; the broker's default is 5 s)
KIP848_HEARTBEAT_MS = int(os.environ.get("KADENCE_BENCH_KIP848_HEARTBEAT_MS") or 3000)
ROLLING_TARGET_S = 2.0


async def run(ctx: Context) -> dict:
    from kadence import Client
    from kadence.testing import PartitionProbes

    task = ctx.task("rebalance")
    loop = asyncio.get_running_loop()
    partitions = int(os.environ.get("KADENCE_BENCH_REBALANCE_PARTITIONS") or 12)
    concurrency = int(os.environ.get("KADENCE_BENCH_REBALANCE_CONCURRENCY") or 64)
    # KADENCE_PROCESSOR_GROUP_PROTOCOL=consumer (KIP-848, decision 0050): the processors' session
    # timeout and heartbeat are then the brokers' settings, made the classic run's here
    protocol = os.environ.get("KADENCE_PROCESSOR_GROUP_PROTOCOL") or "classic"
    broker_config = None
    if protocol == "consumer":
        session = session_timeout_ms()
        broker_config = {
            "group.consumer.min.session.timeout.ms": session,
            "group.consumer.session.timeout.ms": session,
            "group.consumer.min.heartbeat.interval.ms": KIP848_HEARTBEAT_MS,
            "group.consumer.heartbeat.interval.ms": KIP848_HEARTBEAT_MS,
        }
    cluster = own_cluster(broker_config)
    ctx.update(task, "starting a three-node cluster of its own")
    await loop.run_in_executor(None, cluster.start)
    settings = dataclasses.replace(ctx.settings, bootstrap=cluster.bootstrap, partitions=partitions)
    events: list[dict] = []
    procs = None
    try:
        config = await loop.run_in_executor(None, lambda: new_namespace(settings, "rebalance", replication=3))
        control_config = await loop.run_in_executor(
            None, lambda: new_namespace(settings, "rebalance-control", replication=3)
        )
        procs = Procs(config, settings.logdir, "rebalance")
        processors = ["p0", "p1", "p2"]
        for name in processors:
            procs.start_processor(name)
        for name in ("t0", "t1", "t2"):
            procs.start_timers(name)
        for name in ("w0", "w1", "w2", "w3"):
            procs.start_worker(name)
        for name in processors:
            await procs.wait_log(name, r"assigned partitions", 120)
        client = await Client.connect(config=config)
        rec = Recorder()
        stop = asyncio.Event()
        runner = loop.create_task(
            closed_loop(client, workloads.ThreeActivities, rec, concurrency=concurrency, stop=stop)
        )
        probes = PartitionProbes(client, partitions)
        probes.start()

        async def settle(seconds: float) -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                procs.check_alive()
                ctx.update(task, f"steady: {len(rec.done)} completed, {rec.inflight} in flight")
                await asyncio.sleep(0.5)

        async def measured(name: str, action) -> None:
            ctx.update(task, f"{name} ...")
            start = time.monotonic()
            await action()
            end = time.monotonic()
            await settle(max(15.0, SIGKILL_TARGET_S * 2))
            unserved = probes.unserved(start, end)
            worst = max((v for v in unserved.values() if v is not None), default=None)
            events.append(
                {"event": name, "seconds": round(end - start, 1), "unserved_s": unserved, "worst_unserved_s": worst}
            )
            ctx.update(task, f"{name}: worst partition unserved {worst} s")

        async def restart(name: str, sig: int) -> None:
            procs.signal(name, sig)
            procs.start_processor(name)
            await procs.wait_log(name, r"assigned partitions", 120)

        try:
            await settle(max(10.0, settings.warmup * 2))
            await measured("sigkill", lambda: restart("p1", signal.SIGKILL))

            async def rolling() -> None:
                for name in processors:
                    await restart(name, signal.SIGTERM)

            await measured("rolling_restart", rolling)

            async def scale_up() -> None:
                procs.start_processor("p3")
                await procs.wait_log("p3", r"assigned partitions", 120)

            await measured("scale_up", scale_up)

            async def scale_down() -> None:
                procs.signal("p3", signal.SIGTERM)

            await measured("scale_down", scale_down)

            # the control: the same start-up (a processor's imports, clients, transactions and
            # group join) in a namespace of its own, which moves no partition of this one: what
            # this event costs is what starting a process costs the shared two cores
            control = Procs(control_config, settings.logdir, "rebalance-control")

            async def start_elsewhere() -> None:
                control.start_processor("c0")
                await control.wait_log("c0", r"assigned partitions", 120)

            try:
                await measured("control_start_elsewhere", start_elsewhere)
            finally:
                await loop.run_in_executor(None, control.close)
        finally:
            stop.set()
            await asyncio.wait({runner}, timeout=60)
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            await probes.stop()
            await client.close()
    finally:
        if procs is not None:
            await loop.run_in_executor(None, procs.close)
        await loop.run_in_executor(None, cluster.cleanup)
    by_event = {e["event"]: e for e in events}
    out = {
        "group_protocol": protocol,
        "broker_group_config": broker_config,
        "partitions": partitions,
        "processors": 3,
        "timer_services": 3,
        "workers": 4,
        "concurrency": concurrency,
        "events": events,
        "completed": len(rec.done),
        "errors": len(rec.errors),
        "sigkill_worst_unserved_s": by_event.get("sigkill", {}).get("worst_unserved_s"),
        "rolling_restart_worst_unserved_s": by_event.get("rolling_restart", {}).get("worst_unserved_s"),
        "targets": {"sigkill_s": SIGKILL_TARGET_S, "rolling_restart_s": ROLLING_TARGET_S},
    }
    ctx.update(
        task,
        f"[green]SIGKILL worst {out['sigkill_worst_unserved_s']} s, rolling restart worst "
        f"{out['rolling_restart_worst_unserved_s']} s[/] ({out['completed']} completed, {out['errors']} errors)",
    )
    return out
