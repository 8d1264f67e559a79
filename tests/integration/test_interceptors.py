"""Interceptors and memo on the real broker: a client's interceptor adds a header that the
processor records with the start and copies to the activity task and the child's start; the
worker's interceptors wrap the activity and the workflow handlers; describe shows the memo."""

from __future__ import annotations

import pytest

from kadence import Client, Worker
from tests.support.greeter import Audit, Child, Greeter, whoami


async def test_headers_and_memo_travel_through_the_engine(processors, kafka_config):
    processors.start()
    audit = Audit()
    client = await Client.connect(config=kafka_config, interceptors=[audit])
    try:
        async with Worker(client, task_queue="icpt", workflows=[Greeter, Child], activities=[whoami]):
            handle = await client.start_workflow(
                Greeter, "ann", id="icpt-1", task_queue="icpt", memo={"customer": {"id": 7}}
            )
            assert (await handle.describe())["memo"] == {"customer": {"id": 7}}
            with pytest.raises(PermissionError):
                await handle.terminate()
            await handle.signal("finish")
            result = await handle.result(timeout=60)
    finally:
        await client.close()
    assert result == {"activity": "ANN IN WHOAMI", "child": "child sees ann", "memo": {"customer": {"id": 7}}}
    assert audit.activities == [{"user": "ann"}]
    assert ("run", "Greeter") in audit.workflow_calls and ("run", "Child") in audit.workflow_calls
