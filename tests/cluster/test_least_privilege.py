"""Each component as a principal of its own, granted only what ``kadence acls COMPONENT`` gives
it (docs/deploy.md, "ACLs"), in a namespace of its own on the secured cluster: the topics are
created by the admin component, and a workflow started by the client component runs through
the processor, the timer service and a worker to its result, and reaches the projections."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from kadence import Client
from kadence.devstack import services as devstack
from kadence.readmodels.visibility import VisibilityFilter, VisibilityReader
from kadence.samples import order_fulfilment as sample
from kadence.topics import KafkaConfig
from kadence.topics.acls import kafka_acls_commands

from .conftest import LEAST_PRIVILEGE, cluster_env, log_tail, run_kadence

NS = "least"


def _env(cluster, component: str, **extra: str) -> dict[str, str]:
    return {**cluster_env(cluster, f"least-{component}", **extra), "KADENCE_NAMESPACE": NS}


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "kadence.cli", *args], env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT
    )


async def test_every_component_runs_with_only_its_own_acls(cluster, tmp_path):
    admin = {**cluster_env(cluster, "admin"), "KADENCE_NAMESPACE": NS}
    for component in LEAST_PRIVILEGE:
        code, out, _ = run_kadence(["acls", component, "--principal", f"User:least-{component}", "--apply"], admin)
        assert code == 0 and "created" in out, out
    code, out, _ = run_kadence(["topics", "apply"], _env(cluster, "admin"))
    assert code == 0, out
    redis = {"KADENCE_REDIS_URL": os.environ["KADENCE_REDIS_URL"]}
    procs = {
        "processor": _start(["processor", "--instance-id", "lp0"], _env(cluster, "processor"), tmp_path / "p.log"),
        "timers": _start(["timers", "--instance-id", "lt0"], _env(cluster, "timers"), tmp_path / "t.log"),
        "worker": _start(
            ["worker", "--task-queue", sample.TASK_QUEUE, "--module", "kadence.samples.order_fulfilment"],
            _env(cluster, "worker"),
            tmp_path / "w.log",
        ),
        "projections": _start(["projections", "run"], _env(cluster, "projections", **redis), tmp_path / "v.log"),
    }

    def logs() -> str:
        return "\n".join(f"--- {name}\n{log_tail(tmp_path / f'{name[0]}.log')}" for name in ("p", "t", "w", "v"))

    try:
        client = await Client.connect(config=KafkaConfig.from_env(_env(cluster, "client")), wait_for_broker=60)
        try:
            result = await client.execute_workflow(
                sample.OrderFulfilment.run, sample.SAMPLE_ORDER, id="least-1", task_queue=sample.TASK_QUEUE
            )
        finally:
            await client.close()
        assert result["order_id"] == sample.SAMPLE_ORDER["order_id"], result
        import redis.asyncio as aioredis

        r = aioredis.from_url(redis["KADENCE_REDIS_URL"])
        reader = VisibilityReader(r, NS)
        deadline, rows = time.monotonic() + 90, []
        while time.monotonic() < deadline:
            page, _ = await reader.list(VisibilityFilter(workflow_type="OrderFulfilment"))
            rows = [row for row in page if row["workflow_id"] == "least-1"]
            if rows and rows[0]["status"] == "completed":
                break
            await asyncio.sleep(0.5)
        await r.aclose()
        assert rows and rows[0]["status"] == "completed", (rows, logs())
        for name, proc in procs.items():
            assert proc.poll() is None, f"{name} exited with {proc.returncode}\n{logs()}"
        text = logs()
        assert "AUTHORIZATION_FAILED" not in text and "not authorized" not in text, text
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_the_printed_commands_are_what_kafkas_own_tool_accepts(cluster):
    """``kadence acls`` without ``--apply`` prints ``kafka-acls.sh`` lines; Kafka's AclCommand
    (the class behind that script) takes two of them as they are."""
    lines = kafka_acls_commands(NS, "processor", "User:printed")
    picked = [line for line in lines if "--transactional-id" in line or "--cluster" in line]
    assert len(picked) == 2
    lib = devstack.resolve_jars()
    for line in picked:
        args = line.split()[1:]
        args[args.index("$BOOTSTRAP")] = cluster.bootstrap
        args[args.index("admin.properties")] = str(cluster.java_client_properties("admin"))
        result = subprocess.run(
            [devstack.java_binary(), "-Xmx256m", "-cp", f"{lib}/*", "org.apache.kafka.tools.AclCommand", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "User:printed" in result.stdout
