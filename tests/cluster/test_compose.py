"""docker-compose.yml's Kadence services, run outside containers (no container engine runs here)
against this folder's three-node secured cluster as the ACL'd user ``app``: each service's own
command line and environment (the compose file's hosts, namespace and ports mapped onto the test's
cluster, Redis and free loopback ports; the cluster's SASL_SSL settings added), in the compose
file's order, each passing its own health check before the next starts. The sample then runs
start to finish through the gateway, and the projections' row says so. Neither file can rot:
this runs the compose file's command lines, tests/unit/test_deployment.py its schema."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import yaml

from .conftest import NAMESPACE, PARTITIONS, cluster_env, free_port, log_tail, run_kadence, stop_all

ROOT = Path(__file__).resolve().parents[2]


def _services() -> dict[str, dict]:
    spec = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return {name: s for name, s in spec["services"].items() if s.get("image", "").startswith("kadence")}


def _localised(service: dict, base_env: dict[str, str]) -> tuple[list[str], list[str] | None, dict[str, str]]:
    """(command, health check, environment) of ``service`` on this machine: every port the service
    listens on (the one its health check asks) becomes a free one, in its command and its check."""
    command = [str(arg) for arg in service["command"]]
    probe = list(service["healthcheck"]["test"][1:]) if "healthcheck" in service else None
    if probe:
        port = re.search(r"127\.0\.0\.1:(\d+)/", " ".join(probe)).group(1)
        mine = str(free_port())
        command = [mine if arg == port else arg for arg in command]
        probe = [arg.replace(f":{port}/", f":{mine}/") for arg in probe]
        probe = [sys.executable if arg == "python" else arg for arg in probe]
    env = {**base_env, **{k: str(v) for k, v in (service.get("environment") or {}).items()}}
    # the compose file's cluster, namespace and Redis are the test's
    env.update(
        {k: base_env[k] for k in ("KADENCE_KAFKA_BOOTSTRAP", "KADENCE_REDIS_URL", "KADENCE_NAMESPACE") if k in base_env}
    )
    env["KADENCE_PARTITIONS"] = str(PARTITIONS)  # the folder's namespace exists with these
    env["KADENCE_LOG_FORMAT"] = "text"
    return command, probe, env


def _healthy(probe: list[str], env: dict[str, str], proc: subprocess.Popen, log: Path, within: float = 90) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"exited with {proc.returncode}: {log_tail(log)}"
        if subprocess.run(probe, env=env, capture_output=True, timeout=30).returncode == 0:
            return
        time.sleep(0.5)
    raise AssertionError(f"not healthy within {within:.0f} s: {log_tail(log)}")


def test_the_compose_services_run_as_written_and_serve_the_sample(cluster, app_config, tmp_path):
    redis_url = os.environ.get("KADENCE_REDIS_URL")
    assert redis_url, "KADENCE_REDIS_URL is not set: run the tests with scripts/devstack.py"
    base = cluster_env(cluster, KADENCE_REDIS_URL=redis_url)
    services = _services()
    assert next(s["command"][0] for s in services.values()) == "topics", "topics apply comes first"
    procs: list[subprocess.Popen] = []
    gateway_port = None
    try:
        for name, service in services.items():
            command, probe, env = _localised(service, base)
            if probe is None:  # a one-shot step: it must end well
                code, out, _ = run_kadence(command, env, timeout=120)
                assert code == 0, f"{name}: kadence {' '.join(command)}: {out[-3000:]}"
                continue
            log = tmp_path / f"{name}.log"
            with open(log, "w") as out:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "kadence.cli", *command],
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                    )
                )
            _healthy(probe, env, procs[-1], log)
            if command[0] == "gateway":
                gateway_port = int(command[command.index("--port") + 1])
        assert gateway_port, "the compose file has no gateway"

        # an API key, as the compose file's header says, then the sample through the gateway
        code, out, _ = run_kadence(["keys", "create", "--namespace", NAMESPACE, "--name", "compose", "--json"], base)
        assert code == 0, out
        key = next(json.loads(line)["key"] for line in out.splitlines() if line.startswith('{"key_id"'))
        workflow_id = f"compose-{uuid.uuid4().hex[:8]}"
        order = {
            "order_id": workflow_id,
            "customer": "ada@example.com",
            "lines": [{"sku": "kettle", "qty": 2, "price_cents": 1999}],
        }
        started = _call(
            gateway_port,
            key,
            "/v1/workflows/OrderFulfilment/start",
            {"workflow_id": workflow_id, "task_queue": "orders", "input": [order]},
        )
        assert started["workflow_id"] == workflow_id, started
        deadline, row = time.monotonic() + 90, None
        while time.monotonic() < deadline:
            described = _call(gateway_port, key, f"/v1/workflows/{workflow_id}")
            if described.get("status") == "completed":
                break
            time.sleep(0.5)
        assert described.get("status") == "completed", described
        assert described["result"]["charged_cents"] == 3998, described
        # the projections (Faust over SASL_SSL) have it too: what `kadence list` and the console show
        while time.monotonic() < deadline and row is None:
            code, listed, _ = run_kadence(["list", "--output", "json"], base)
            assert code == 0, listed
            rows = next(json.loads(line)["items"] for line in listed.splitlines() if line.startswith('{"items"'))
            row = next((r for r in rows if r["workflow_id"] == workflow_id and r["status"] == "completed"), None)
            time.sleep(0.5)
        assert row is not None, (
            f"visibility never said {workflow_id} completed: {log_tail(tmp_path / 'projections.log')}"
        )
    finally:
        stop_all(procs)
    for proc in procs:  # a graceful stop, not a crash on the way out
        assert proc.returncode in (0, -signal.SIGTERM), proc.args


def _call(port: int, key: str, path: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())
