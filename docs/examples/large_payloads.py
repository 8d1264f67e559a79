"""Large payloads: a 5 MB document goes through a workflow, an activity and back; the history
holds a reference of about 100 bytes for it, and the document is in the payload store once. It
runs on ``kadence.testing``'s in-process engine, so it needs no broker:

    .venv/bin/python docs/examples/large_payloads.py

Against Kafka the same store is given to ``Client.connect(large_payloads=...)``, or set by
``KADENCE_PAYLOAD_DIR`` (or ``KADENCE_PAYLOAD_S3_BUCKET``) for the client, the worker, the gateway
and the CLI.
"""

import asyncio
import tempfile
from datetime import timedelta

from kadence import activity, workflow
from kadence.storage import open_large_payloads
from kadence.testing import WorkflowEnvironment
from kadence.topics import LargePayloadConfig
from kadence.topics.archive import ArchiveStoreConfig


@activity.defn
async def word_count(document: str) -> int:
    return len(document.split())


@workflow.defn
class Index:
    @workflow.run
    async def run(self, document: str) -> dict:
        words = await workflow.execute_activity(word_count, document, start_to_close_timeout=timedelta(seconds=30))
        return {"words": words, "document": document}  # a large result is stored too


async def main() -> None:
    document = "lorem ipsum " * 440_000  # 5.3 MB
    with tempfile.TemporaryDirectory() as directory:
        large = open_large_payloads(
            LargePayloadConfig(store=ArchiveStoreConfig(directory=directory))
        )  # threshold 256 KiB
        async with WorkflowEnvironment(workflows=[Index], activities=[word_count], large_payloads=large) as env:
            handle = await env.client.start_workflow(Index, document, id="index-1", task_queue="docs")
            result = await handle.result()
            started = (await handle.history(raw=True))[0]["attributes"][1]
        print(f"words: {result['words']}, document back intact: {result['document'] == document}")
        print(f"the start event's input is {len(started['input'])} bytes: {started['input'][24:40]!r}...")
        print(f"objects in the store: {len(large.store.list('payloads/', suffix='.bin'))}")


if __name__ == "__main__":
    asyncio.run(main())
