"""Local activities (decision 0043) in ``WorkflowEnvironment``: run as a worker runs them, with
the same markers, retries and failures, without Kafka."""

from __future__ import annotations

from datetime import timedelta

from kadence import ActivityError, ApplicationError, Replayer, RetryPolicy, activity, workflow
from kadence.interceptors import Interceptor
from kadence.testing import WorkflowEnvironment

attempts: dict[str, int] = {}


@activity.defn
async def price(sku: str) -> int:
    return {"tea": 4, "cake": 6}[sku]


@activity.defn
def stamp(text: str) -> str:  # sync: runs in a thread, as on a worker
    return f"[{text}]"


@activity.defn
async def wobbly(key: str) -> str:
    attempts[key] = attempts.get(key, 0) + 1
    if attempts[key] < 3:
        raise RuntimeError("not yet")
    return f"{key} after {attempts[key]}"


@activity.defn
async def declined(amount: int) -> int:
    raise ApplicationError("declined", type="Declined", non_retryable=True)


@workflow.defn
class Basket:
    @workflow.run
    async def run(self, skus: list) -> list:
        total = 0
        for sku in skus:
            total += await workflow.execute_local_activity(price, sku)
        label = await workflow.execute_local_activity(stamp, str(total))
        retried = await workflow.execute_local_activity(
            wobbly, "k", retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=1), maximum_attempts=5)
        )
        try:
            await workflow.execute_local_activity(declined, total)
            refused = "no"
        except ActivityError as exc:
            refused = f"{type(exc.__cause__).__name__}: {exc.__cause__}"
        return [total, label, retried, refused]


@workflow.defn
class GivesUp:
    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.execute_local_activity(
                wobbly,
                "never",
                retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=1), maximum_attempts=2),
            )
        except ActivityError as exc:
            return str(exc.__cause__)
        return "ran"


async def test_local_activities_run_in_the_workflow_task_and_are_recorded_as_markers():
    attempts.clear()
    async with WorkflowEnvironment(workflows=[Basket], activities=[price, stamp, wobbly, declined]) as env:
        handle = await env.client.start_workflow(Basket, ["tea", "cake"], id="basket", task_queue="q")
        assert await handle.result(timeout=30) == [10, "[10]", "k after 3", "ApplicationError: declined"]
        events = await handle.history()
    kinds = [e["type"] for e in events]
    assert kinds.count("WorkflowTaskCompleted") == 1 and "ActivityTaskScheduled" not in kinds
    names = [e["attributes"]["name"] for e in events if e["type"] == "MarkerRecorded"]
    assert names == [
        "local_activity:1:price",
        "local_activity:2:price",
        "local_activity:3:stamp",
        "local_activity:4:wobbly",
        "local_activity_failed:5:declined",
    ]
    assert env.stats["local_activities_completed"] == 4 and env.stats["local_activities_failed"] == 1


async def test_the_last_attempts_failure_reaches_the_workflow():
    attempts.clear()
    async with WorkflowEnvironment(workflows=[GivesUp], activities=[wobbly]) as env:
        assert await env.client.execute_workflow(GivesUp, id="gives-up", task_queue="q", result_timeout=30) == "not yet"
    assert attempts["never"] == 2


@workflow.defn
class ChangesItsMind:
    @workflow.run
    async def run(self) -> int:
        dropped = workflow.execute_local_activity(price, "cake")
        dropped.cancel()  # never awaited: it is not run and leaves no marker
        return await workflow.execute_local_activity(price, "tea")


async def test_a_local_activity_the_workflow_stops_waiting_for_is_not_run_and_replays():
    async with WorkflowEnvironment(workflows=[ChangesItsMind], activities=[price]) as env:
        handle = await env.client.start_workflow(ChangesItsMind, id="mind", task_queue="q")
        assert await handle.result(timeout=30) == 4
        events = await handle.history()
    names = [e["attributes"]["name"] for e in events if e["type"] == "MarkerRecorded"]
    assert names == ["local_activity:2:price"] and env.stats["local_activities_completed"] == 1
    assert Replayer(workflows=[ChangesItsMind]).replay_json(events).ok


@activity.defn
async def seen_headers() -> dict:
    return dict(activity.info().headers)


@workflow.defn
class HeadersEverywhere:
    @workflow.run
    async def run(self) -> list:
        local = await workflow.execute_local_activity(seen_headers)
        remote = await workflow.execute_activity(seen_headers, start_to_close_timeout=timedelta(seconds=10))
        return [local, remote]


class _Tenant(Interceptor):
    async def intercept_client(self, call, nxt):
        call.headers["tenant"] = "acme"
        return await nxt(call)


async def test_a_local_activity_sees_the_runs_headers_as_an_activity_does():
    async with WorkflowEnvironment(
        workflows=[HeadersEverywhere], activities=[seen_headers], interceptors=[_Tenant()]
    ) as env:
        result = await env.client.execute_workflow(HeadersEverywhere, id="headers", task_queue="q", result_timeout=30)
    assert result == [{"tenant": "acme"}, {"tenant": "acme"}]
