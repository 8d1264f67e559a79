"""Interceptors and memo: an interceptor adds the caller's identity to every start, checks it on
each activity, refuses terminations and counts workflow handlers; the memo travels with the run.
It runs on ``kadence.testing``'s in-process engine, so it needs no broker:

    .venv/bin/python docs/examples/interceptors.py

Against Kafka the interceptor is given to ``Client.connect(interceptors=[...])``; the client's
Workers use it too.
"""

import asyncio
import collections
from datetime import timedelta

from kadence import activity, workflow
from kadence.interceptors import Interceptor
from kadence.testing import WorkflowEnvironment


@activity.defn
async def charge(cents: int) -> str:
    return f"charged {cents} for {activity.info().headers['user']}"


@workflow.defn
class Checkout:
    @workflow.run
    async def run(self, cents: int) -> str:
        channel = workflow.info().memo.get("channel")
        receipt = await workflow.execute_activity(charge, cents, start_to_close_timeout=timedelta(seconds=30))
        return f"{receipt} via {channel}"


class Identity(Interceptor):
    def __init__(self, user: str) -> None:
        self.user = user
        self.handlers: collections.Counter = collections.Counter()

    async def intercept_client(self, call, nxt):
        if call.operation == "terminate":
            raise PermissionError(f"{self.user} may not terminate {call.workflow_id}")
        call.headers["user"] = self.user  # recorded with a start, given to its activities
        return await nxt(call)

    async def intercept_activity(self, call, nxt):
        if "user" not in call.info.headers:
            raise PermissionError("an activity without a user")
        return await nxt(call)

    def intercept_workflow(self, call, nxt):  # deterministic: it runs again on every replay
        self.handlers[call.kind] += 1
        return nxt(call)


async def main() -> None:
    identity = Identity("ann")
    async with WorkflowEnvironment(workflows=[Checkout], activities=[charge], interceptors=[identity]) as env:
        handle = await env.client.start_workflow(
            Checkout, 6500, id="checkout-1", task_queue="shop", memo={"channel": "web"}
        )
        print("result:", await handle.result())
        print("memo:", (await handle.describe())["memo"])
        try:
            await handle.terminate()
        except PermissionError as exc:
            print("refused:", exc)
    print("workflow handlers run:", dict(identity.handlers))


if __name__ == "__main__":
    asyncio.run(main())
