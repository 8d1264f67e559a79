"""Interceptors' shared workflow: headers from a client's interceptor reach the workflow, its
activity and its child; an interceptor that records every call and refuses terminate."""

from __future__ import annotations

from datetime import timedelta

from kadence import activity, workflow
from kadence.interceptors import ActivityCall, ClientCall, Interceptor, WorkflowCall

T = timedelta(seconds=10)


@activity.defn
async def whoami() -> str:
    return f"{activity.info().headers.get('user')} in {activity.info().activity_type}"


@workflow.defn
class Child:
    @workflow.run
    async def run(self) -> str:
        return f"child sees {workflow.info().headers.get('user')}"


@workflow.defn
class Greeter:
    def __init__(self) -> None:
        self.done = False
        self.user_seen = ""

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.query
    def user(self) -> str:
        return self.user_seen

    @workflow.update
    def ping(self) -> str:
        return "pong"

    @workflow.run
    async def run(self, name: str) -> dict:
        self.user_seen = workflow.info().headers.get("user", "")
        act = await workflow.execute_activity(whoami, start_to_close_timeout=T)
        child = await workflow.execute_child_workflow(Child)
        await workflow.wait_condition(lambda: self.done)
        return {"activity": act, "child": child, "memo": workflow.info().memo}


class Audit(Interceptor):
    def __init__(self) -> None:
        self.client_calls: list[tuple[str, str | None]] = []
        self.activities: list[dict] = []
        self.workflow_calls: list[tuple[str, str]] = []

    async def intercept_client(self, call: ClientCall, nxt):
        self.client_calls.append((call.operation, call.name))
        if call.operation == "terminate":
            raise PermissionError("terminate is not allowed for this user")
        call.headers["user"] = "ann"
        return await nxt(call)

    async def intercept_activity(self, call: ActivityCall, nxt):
        self.activities.append(dict(call.info.headers))
        return (await nxt(call)).upper()

    def intercept_workflow(self, call: WorkflowCall, nxt):
        self.workflow_calls.append((call.kind, call.name))
        return nxt(call)
