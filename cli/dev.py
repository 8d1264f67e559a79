"""``kadence dev``: the whole stack for development, with the bundled sample run once.

Needs a broker (``make dev`` starts one and sets KADENCE_KAFKA_BOOTSTRAP). Starts a history
processor, the timer service, the gateway (with the console at /ui) and, when KADENCE_REDIS_URL
names a Redis (``make dev`` starts one), the projections behind ``kadence list``, as child
processes (started again when one exits: ``kadence.cli.supervisor``), each serving Prometheus
metrics on a free loopback port; a worker for the sample and the batch worker in this process;
then starts the sample order-fulfilment workflow through the gateway, prints its result, its
history, its row in the visibility projection, the console's URL and the metrics endpoints, and
keeps serving until interrupted (or exits at once with KADENCE_DEV_ONCE=1).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
import uuid
from typing import Any

import click
import httpx

from kadence.topics import Catalogue, KafkaConfig

from .supervisor import Supervisor

__all__ = ["dev"]


def _child_env(config: KafkaConfig) -> dict[str, str]:
    return {
        **os.environ,
        "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap,
        "KADENCE_NAMESPACE": config.namespace,
        "KADENCE_LOG_FORMAT": config.log_format,
    }


async def _wait_http(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as http:
        while time.monotonic() < deadline:
            try:
                if (await http.get(url, timeout=1)).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.2)
    raise click.ClickException(f"{url} did not answer within {timeout}s (see the gateway's log above)")


async def _show_visibility(
    config: KafkaConfig, redis_url: str, workflow_id: str, run_id: str, timeout: float = 60
) -> None:
    """Wait for the visibility projection to hold the sample's closed run, and print it (what
    ``kadence list`` shows)."""
    import redis.asyncio as aioredis

    from kadence.readmodels.visibility import VisibilityReader

    redis = aioredis.from_url(redis_url, socket_timeout=10, socket_connect_timeout=5)
    try:
        reader = VisibilityReader(redis, config.namespace)
        deadline = time.monotonic() + timeout
        while True:
            row = await reader.describe(workflow_id, run_id)
            if row is not None and row.get("status") != "running":
                click.echo(
                    f"==> visibility (`kadence list`): {row['workflow_id']}  {row['workflow_type']}  {row['status']}"
                )
                return
            if time.monotonic() > deadline:
                click.echo(
                    f"==> visibility: the projection has not shown the run within {timeout:.0f} s "
                    "(see the projections' log above)"
                )
                return
            await asyncio.sleep(0.2)
    finally:
        await redis.aclose()


def _workers(client: Any, registry: Any, redis_url: str | None) -> list[Any]:
    """The dev stack's workers: the sample's, the schedules' (`kadence schedules ...`), and with
    Redis the batches' (`kadence batch ...` walks the visibility projection)."""
    from kadence import Worker
    from kadence.operations import BATCH_TASK_QUEUE, Batch, Schedule, batch_activities, schedule_activities
    from kadence.samples import order_fulfilment as sample
    from kadence.topics.schedules import SCHEDULES_TASK_QUEUE

    workers = [
        Worker(
            client,
            task_queue=sample.TASK_QUEUE,
            workflows=sample.WORKFLOWS,
            activities=sample.ACTIVITIES,
            metrics_registry=registry,
        ),
        Worker(client, task_queue=SCHEDULES_TASK_QUEUE, workflows=[Schedule], activities=schedule_activities(client)),
    ]
    if redis_url:
        workers.append(
            Worker(
                client, task_queue=BATCH_TASK_QUEUE, workflows=[Batch], activities=batch_activities(client, redis_url)
            )
        )
    return workers


async def _run(config: KafkaConfig, port: int, once: bool, redis_url: str | None, metrics: dict[str, int]) -> None:
    from contextlib import AsyncExitStack

    from kadence import Client
    from kadence.operations import BATCH_TASK_QUEUE
    from kadence.samples import order_fulfilment as sample
    from kadence.topics.schedules import SCHEDULES_TASK_QUEUE

    base = f"http://127.0.0.1:{port}"
    await _wait_http(f"{base}/healthz")
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry()
    start_http_server(metrics["worker"], addr="127.0.0.1", registry=registry)
    client = await Client.connect(config=config)
    async with AsyncExitStack() as workers:
        for worker in _workers(client, registry, redis_url):
            await workers.enter_async_context(worker)
        workflow_id = f"order-{sample.SAMPLE_ORDER['order_id']}-{uuid.uuid4().hex[:8]}"
        click.echo(f"==> starting the sample OrderFulfilment as {workflow_id} through {base}")
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            resp = await http.post(
                "/v1/workflows/OrderFulfilment/start",
                json={"workflow_id": workflow_id, "task_queue": sample.TASK_QUEUE, "input": [sample.SAMPLE_ORDER]},
                headers={"Idempotency-Key": f"dev-{workflow_id}"},
            )
            if resp.status_code != 201:
                raise click.ClickException(f"start failed: {resp.status_code} {resp.text}")
            run_id = resp.json()["run_id"]
            result = await client.get_workflow_handle(workflow_id, run_id=run_id).result(timeout=120)
            click.echo("==> result")
            click.echo(json.dumps(result, indent=2))
            hist = (await http.get(f"/v1/workflows/{workflow_id}/history", params={"run_id": run_id})).json()
        click.echo(f"==> history ({len(hist['events'])} events)")
        for ev in hist["events"]:
            attrs = ev["attributes"]
            detail = attrs.get("activity_type") or ""
            click.echo(f"  {ev['seq']:>3}  {ev['time']}  {ev['type']:<28} {detail}")
        if redis_url:
            await _show_visibility(config, redis_url, workflow_id, run_id)
        click.echo(f"==> console {base}/ui (no sign-in: the dev gateway runs --no-auth)")
        click.echo(
            "==> metrics: "
            + ", ".join(
                [f"gateway {base}/metrics"] + [f"{name} http://127.0.0.1:{p}/metrics" for name, p in metrics.items()]
            )
        )
        if once:
            click.echo("==> KADENCE_DEV_ONCE=1: done")
        else:
            click.echo(
                f"==> serving: gateway {base} (OpenAPI at {base}/openapi.json), namespace "
                f"{config.namespace}, workers on task queues {sample.TASK_QUEUE}, {SCHEDULES_TASK_QUEUE} "
                "(kadence schedules)"
                f"{' and ' + BATCH_TASK_QUEUE + ' (kadence batch)' if redis_url else ''}. Ctrl-C to stop."
            )
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await stop.wait()
    await client.close()


@click.command()
@click.option("--port", default=8080, show_default=True, type=int, envvar="KADENCE_GATEWAY_PORT")
@click.option("--once/--serve", default=None, help="exit after the sample completes [env KADENCE_DEV_ONCE=1]")
@click.pass_obj
def dev(config: KafkaConfig, port: int, once: bool | None) -> None:
    """Run processor, gateway and a sample worker; run the sample once."""
    if once is None:
        once = os.environ.get("KADENCE_DEV_ONCE", "") not in ("", "0", "false")
    report = Catalogue(config).apply()
    click.echo(
        f"==> topics of namespace {config.namespace}: {len(report.created)} created, "
        f"{len(report.existing)} already there"
    )
    if not (os.environ.get("KADENCE_PAYLOAD_DIR") or os.environ.get("KADENCE_PAYLOAD_S3_BUCKET")):
        # one machine: payloads over the threshold go to a local directory (the processes here,
        # and the sample's client, read this variable)
        os.environ["KADENCE_PAYLOAD_DIR"] = os.path.join(
            os.path.expanduser("~"), ".local", "share", "kadence", "payloads"
        )
    click.echo(f"==> large payloads (over the threshold) are stored in {os.environ.get('KADENCE_PAYLOAD_DIR') or 's3'}")
    supervisor = Supervisor(echo=click.echo)
    env = _child_env(config)
    me = [sys.executable, "-m", "kadence.cli"]
    metrics = {"processor": _free_port(), "timer service": _free_port(), "worker": _free_port()}
    supervisor.start(
        "processor", [*me, "processor", "--instance-id", "dev-0", "--metrics-port", str(metrics["processor"])], env
    )
    supervisor.start(
        "timer service", [*me, "timers", "--instance-id", "dev-0", "--metrics-port", str(metrics["timer service"])], env
    )
    supervisor.start("gateway", [*me, "gateway", "--port", str(port), "--no-auth"], env)
    redis_url = os.environ.get("KADENCE_REDIS_URL")
    if redis_url:
        metrics["projections"] = _free_port()
        supervisor.start(
            "projections",
            [*me, "projections", "run", "--instance-id", "dev-0", "--metrics-port", str(metrics["projections"])],
            env,
        )
    else:
        click.echo("==> KADENCE_REDIS_URL is not set: the projections (`kadence list`, the console's list) are not run")
    try:
        asyncio.run(_run(config, port, once, redis_url, metrics))
    finally:
        supervisor.stop()


def _free_port() -> int:
    """A loopback port nobody listens on now (for a process's metrics)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
