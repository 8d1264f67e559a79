"""Hello, eager start (Temporal: ``request_eager_start``): the worker in the starting process runs
the run's first workflow task before the start is sent, and the engine records the start, that
task and its local activities' results in one Kafka transaction. Once through the SDK client, once
through the HTTP gateway served in the same process as the worker (``create_app(...,
eager_starters=[worker])``)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import uvicorn

from kadence import Client, Worker, activity, workflow
from kadence.gateway import GatewayConfig, create_app

TASK_QUEUE = "hello-eager"


@activity.defn
async def greet(name: str) -> str:
    return f"Hello, {name}!"


@workflow.defn
class Greet:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_local_activity(greet, name, start_to_close_timeout=timedelta(seconds=5))


async def main(client: Client) -> list[str]:
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[Greet], activities=[greet]) as worker:
        await worker.wait_started(60)  # a worker runs eager starts' first tasks once it serves
        by_sdk = await client.execute_workflow(
            Greet, "SDK", id="hello-eager-sdk", task_queue=TASK_QUEUE, request_eager_start=True
        )
        # the gateway in this process, on this event loop, with the worker beside it
        app = create_app(GatewayConfig(kafka=client.config, auth=False), eager_starters=[worker])
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        serving = asyncio.create_task(server.serve())
        try:
            while not server.started:  # noqa: ASYNC110 - uvicorn offers a flag, no event
                await asyncio.sleep(0.05)
            port = server.servers[0].sockets[0].getsockname()[1]
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
                reply = await http.post(
                    f"/v1/workflows/{Greet.__name__}/start",
                    json={
                        "workflow_id": "hello-eager-http",
                        "task_queue": TASK_QUEUE,
                        "input": ["HTTP"],
                        "request_eager_start": True,
                        "wait_seconds": 10,
                    },
                )
                reply.raise_for_status()
                by_http = reply.json()["result"]
        finally:
            server.should_exit = True
            await serving
        return [by_sdk, by_http]
