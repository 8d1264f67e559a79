"""``kadence dev`` starts its processor again when it dies, and the restarted one serves."""

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import httpx

from kadence.samples.order_fulfilment import SAMPLE_ORDER, TASK_QUEUE
from tests.integration.conftest import stop_process
from tests.support.net import free_port


def _wait_line(lines: list[str], needle: str, timeout: float, proc: subprocess.Popen) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in list(lines):
            if needle in line:
                return line
        if proc.poll() is not None:
            raise AssertionError(f"kadence dev exited ({proc.returncode}) before {needle!r}:\n" + "".join(lines[-40:]))
        time.sleep(0.1)
    raise AssertionError(f"no {needle!r} within {timeout}s:\n" + "".join(lines[-40:]))


def test_a_killed_processor_is_started_again_by_kadence_dev_and_serves(kafka_bootstrap):
    port = free_port()
    env = {
        **os.environ,
        "KADENCE_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "KADENCE_DEV_ONCE": "0",
        "KADENCE_NAMESPACE": f"devsup{uuid.uuid4().hex[:6]}",
        "KADENCE_GATEWAY_PORT": str(port),
    }
    dev = subprocess.Popen(
        [sys.executable, "-m", "kadence.cli", "--log-level", "warning", "dev"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(dev.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        _wait_line(lines, "==> serving", 180, dev)
        # every process serves its metrics where the banner says (issue 17)
        banner = _wait_line(lines, "==> metrics: ", 5, dev)
        for part in banner.split(": ", 1)[1].strip().split(", "):
            name, url = part.rsplit(" ", 1)
            scraped = httpx.get(url, timeout=10)
            assert scraped.status_code == 200 and "# TYPE" in scraped.text, (name, url, scraped.status_code)
        found = subprocess.run(
            ["pgrep", "-P", str(dev.pid), "-f", "kadence.cli processor"], capture_output=True, text=True
        ).stdout.split()
        assert len(found) == 1, found
        os.kill(int(found[0]), signal.SIGKILL)
        _wait_line(lines, "==> processor exited with status -9; starting it again in", 30, dev)
        _wait_line(lines, "==> processor started again (restart 1)", 30, dev)
        # the new processor answers: a start through the gateway gets its 201 (the engine's reply)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            resp = http.post(
                "/v1/workflows/OrderFulfilment/start",
                json={
                    "workflow_id": f"after-restart-{uuid.uuid4().hex[:6]}",
                    "task_queue": TASK_QUEUE,
                    "input": [SAMPLE_ORDER],
                },
                headers={"Idempotency-Key": "after-restart"},
            )
        assert resp.status_code == 201, resp.text
    finally:
        stop_process(dev, signal.SIGINT, 60)
