"""docs/tracing.md's example: one trace for an order, printed as JSON spans.

Run it next to `make dev` (a broker and the engine on 127.0.0.1:9092, namespace `kadence`):

    .venv/bin/python docs/examples/tracing.py

It runs the bundled sample's worker in this process, starts an order under a `checkout` span and
waits for its result; every span printed carries the trace ID of `checkout`.
"""

import asyncio
import uuid

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

from kadence import Client, Worker
from kadence.samples.order_fulfilment import ACTIVITIES, SAMPLE_ORDER, TASK_QUEUE, WORKFLOWS, OrderFulfilment

provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
trace.set_tracer_provider(provider)  # or tracer_provider=provider on Client.connect and Worker


async def main() -> None:
    client = await Client.connect()  # KADENCE_KAFKA_BOOTSTRAP / KADENCE_NAMESPACE, else the defaults
    async with Worker(client, task_queue=TASK_QUEUE, workflows=WORKFLOWS, activities=ACTIVITIES):
        with trace.get_tracer("shop").start_as_current_span("checkout"):
            handle = await client.start_workflow(
                OrderFulfilment, SAMPLE_ORDER, id=f"order-{uuid.uuid4().hex[:8]}", task_queue=TASK_QUEUE
            )
            print(await handle.result())
    await client.close()


asyncio.run(main())
provider.shutdown()  # the last spans are exported before the program ends
