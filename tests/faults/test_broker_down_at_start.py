"""A processor, a timer service, the projections and a client (a worker's) started while the
broker is down wait for it instead of exiting (issue 16, item 3): the processor's topic check, build defaults, committed offsets and
restores are retried; ``Client.connect(wait_for_broker=...)`` tries again until Kafka answers.
Their ``/readyz`` answers 503 "waiting for the broker" meanwhile, and 200 once they serve."""

from __future__ import annotations

import asyncio
import logging
import uuid

import httpx

from kadence import Client, Worker
from kadence.topics import Catalogue, KafkaConfig
from tests.integration.conftest import ProcessorProcs, wait_until
from tests.integration.projection_support import ProjectionProcs
from tests.integration.workflows import ThreeSteps, add, double, three_steps_result
from tests.support.net import free_port


def _ready(port: int) -> tuple[int, dict] | None:
    try:
        resp = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
    except httpx.HTTPError:
        return None  # not listening yet
    return resp.status_code, resp.json()


async def test_a_processor_and_a_client_started_before_the_broker_serve_once_it_is_up(own_broker, tmp_path, caplog):
    config = KafkaConfig(bootstrap=own_broker.bootstrap, namespace=f"t{uuid.uuid4().hex[:10]}", partitions=2)
    Catalogue(config).apply()
    own_broker.stop()
    procs = ProcessorProcs(config, tmp_path)
    projections = ProjectionProcs(config, tmp_path)
    try:
        proc_port, timers_port = free_port(), free_port()
        proc = procs.start("p0", env={"KADENCE_PROCESSOR_METRICS_PORT": str(proc_port)})
        timers = procs.start_timers("t0", env={"KADENCE_TIMERS_METRICS_PORT": str(timers_port)})
        projection = projections.start("v0")
        projection_logs = lambda: "\n".join(p.read_text() for p in tmp_path.glob("projection-v0-*.log"))  # noqa: E731
        logs = lambda: "\n".join(p.read_text() for p in tmp_path.glob("processor-p0-*.log"))  # noqa: E731
        timer_logs = lambda: "\n".join(p.read_text() for p in tmp_path.glob("timers-t0-*.log"))  # noqa: E731
        await wait_until(lambda: "waiting for the broker" in logs(), 60, "the processor waiting for the broker")
        await wait_until(
            lambda: "waiting for the broker" in timer_logs(), 60, "the timer service waiting for the broker"
        )
        await wait_until(
            lambda: "projections v0: starting: waiting for the broker" in projection_logs(),
            60,
            "the projections waiting for the broker",
        )
        assert proc.poll() is None, f"the processor exited while the broker was down:\n{logs()[-2000:]}"
        assert timers.poll() is None, f"the timer service exited while the broker was down:\n{timer_logs()[-2000:]}"
        for port in (proc_port, timers_port):
            code, body = await wait_until(lambda port=port: _ready(port), 30, "the readiness endpoint")
            assert code == 503 and body["status"] == "waiting for the broker" and body["broker"], body
        caplog.set_level(logging.WARNING, logger="kadence._client")
        connecting = asyncio.create_task(Client.connect(config=config, wait_for_broker=300))
        await wait_until(lambda: "waiting for the broker" in caplog.text, 90, "the client waiting for the broker")
        assert not connecting.done()
        own_broker.start()
        await wait_until(lambda: "assigned partitions" in logs(), 120, "the processor taking its shards")
        client = await asyncio.wait_for(connecting, 120)
        try:
            async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double]):
                handle = await client.start_workflow(ThreeSteps, 4, id="after-outage", task_queue="q")
                assert await handle.result(timeout=60) == three_steps_result(4)
        finally:
            await client.close()
        assert proc.poll() is None
        await wait_until(lambda: "timer service t0 started" in timer_logs(), 60, "the timer service starting")
        assert timers.poll() is None
        assert projection.poll() is None, f"the projections exited:\n{projection_logs()[-3000:]}"
        for port in (proc_port, timers_port):
            await wait_until(
                lambda port=port: _ready(port) == (200, {"status": "ready"}), 30, "the service reporting ready"
            )
    finally:
        projections.close()
        procs.close()


async def test_a_worker_started_while_the_broker_is_down_waits_for_it_then_serves(own_broker, tmp_path, caplog):
    """A worker started again during a broker restart exited on its first topic check (chaos seed
    2029297002: `cannot list topics`); it waits instead, and a shutdown meanwhile ends it."""
    config = KafkaConfig(bootstrap=own_broker.bootstrap, namespace=f"t{uuid.uuid4().hex[:10]}", partitions=2)
    Catalogue(config).apply()
    procs = ProcessorProcs(config, tmp_path)
    client = await Client.connect(config=config)
    try:
        procs.start("p0")
        own_broker.stop()
        caplog.set_level(logging.WARNING, logger="kadence._worker")
        given_up = Worker(client, task_queue="never", workflows=[ThreeSteps], activities=[add, double])
        waiting = asyncio.create_task(given_up.run())
        worker = Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double])
        async with worker:
            await wait_until(
                lambda: caplog.text.count("waiting for the broker") >= 2, 90, "both workers waiting for the broker"
            )
            given_up.shutdown()  # shut down before the broker came back: it ends, having started nothing
            await asyncio.wait_for(waiting, 30)
            assert not worker._runner.done()
            own_broker.start()
            handle = await client.start_workflow(ThreeSteps, 6, id="worker-after-outage", task_queue="q", timeout=120)
            assert await handle.result(timeout=120) == three_steps_result(6)
    finally:
        await client.close()
        procs.close()
