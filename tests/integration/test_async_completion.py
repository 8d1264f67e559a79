"""Async activity completion (issue 44, item 4) on the broker: an activity function hands its
attempt to someone else (``activity.raise_complete_async()``), who completes, fails or heartbeats
it by task token or by workflow and activity ID; a completion for an attempt that has ended is
refused with ``ActivityNotCurrentError`` and changes nothing."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from kadence import ActivityError, ActivityNotCurrentError, ApplicationError, RetryPolicy, Worker, activity, workflow
from kadence.gateway import GatewayConfig, create_app

from .conftest import wait_until
from .gateway_support import serve

#: workflow ID -> the task token its `defer` activity handed out
TOKENS: dict[str, bytes] = {}


@activity.defn
async def defer(order: str) -> str:
    TOKENS[activity.info().workflow_id] = activity.info().task_token
    activity.raise_complete_async()


@workflow.defn
class Approval:
    @workflow.run
    async def run(self, order: str) -> str:
        try:
            return await workflow.execute_activity(
                defer,
                order,
                start_to_close_timeout=timedelta(minutes=5),
                retry_policy=RetryPolicy(maximum_attempts=1),
            )
        except ActivityError as err:
            return f"refused: {err.__cause__}"


async def test_a_deferred_activity_completes_by_its_token_once_and_a_second_completion_is_refused(client, processors):
    processors.start()
    async with Worker(client, task_queue="approvals", workflows=[Approval], activities=[defer]):
        handle = await client.start_workflow(Approval, "o-1", id="approval-1", task_queue="approvals")
        await wait_until(lambda: "approval-1" in TOKENS, 60, "the activity to hand out its token")
        by_token = client.get_async_activity_handle(TOKENS["approval-1"])
        await by_token.heartbeat({"reviewer": "ana"})
        d = await handle.describe()
        assert d.pending_activities[0].heartbeat_details == {"reviewer": "ana"}
        await by_token.complete("approved by ana")
        assert await handle.result(timeout=60) == "approved by ana"
        with pytest.raises(ActivityNotCurrentError, match="already ended"):
            await by_token.complete("approved twice")
    events = await handle.history()
    completed = [e for e in events if e["type"] == "ActivityTaskCompleted"]
    assert len(completed) == 1 and completed[0]["attributes"]["identity"].startswith("async:")


async def test_a_deferred_activity_fails_by_workflow_and_activity_id(client, processors):
    processors.start()
    async with Worker(client, task_queue="approvals", workflows=[Approval], activities=[defer]):
        handle = await client.start_workflow(Approval, "o-2", id="approval-2", task_queue="approvals")
        await wait_until(lambda: "approval-2" in TOKENS, 60, "the activity to start")
        by_id = client.get_async_activity_handle(workflow_id="approval-2", activity_id="1")
        await by_id.heartbeat("looking")
        await by_id.fail(ApplicationError("over budget", type="OverBudget", non_retryable=True))
        assert await handle.result(timeout=60) == "refused: over budget"
        with pytest.raises(ActivityNotCurrentError):
            await by_id.complete("too late")


async def test_over_http_a_deferred_activity_heartbeats_completes_and_a_stale_token_is_a_409(
    client, processors, kafka_config
):
    processors.start()
    app = create_app(GatewayConfig(kafka=kafka_config, auth=False, reply_timeout=30.0))
    async with Worker(client, task_queue="approvals", workflows=[Approval], activities=[defer]):
        handle = await client.start_workflow(Approval, "o-3", id="approval-3", task_queue="approvals")
        await wait_until(lambda: "approval-3" in TOKENS, 60, "the activity to hand out its token")
        token = TOKENS["approval-3"].decode()
        with serve(app) as url:
            async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                bad = await http.post("/v1/activities/complete", json={"task_token": "not-a-token", "result": 1})
                assert bad.status_code == 400 and bad.json()["error"]["field"] == "task_token"
                beat = await http.post("/v1/activities/heartbeat", json={"task_token": token, "details": {"p": 1}})
                assert beat.status_code == 200 and beat.json() == {"status": "recorded"}
                done = await http.post("/v1/activities/complete", json={"task_token": token, "result": "approved"})
                assert done.status_code == 200 and done.json() == {"status": "completed"}
                assert await handle.result(timeout=60) == "approved"
                again = await http.post("/v1/activities/fail", json={"task_token": token, "message": "late"})
                assert again.status_code == 409 and again.json()["error"]["code"] == "activity_not_current"
