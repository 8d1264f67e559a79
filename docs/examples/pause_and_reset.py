"""Operator actions: pause and unpause a run, then reset a closed one after a dry run. It runs on
``kadence.testing``'s in-process engine, so it needs no broker:

    .venv/bin/python docs/examples/pause_and_reset.py

The same calls work against Kafka with ``Client.connect``, and as ``kadence pause|unpause|reset``
and ``POST /v1/workflows/{id}/pause|unpause|reset``.
"""

import asyncio
from datetime import timedelta

from kadence import ResetRejectedError, activity, workflow
from kadence.testing import WorkflowEnvironment

CALLS: list[str] = []


@activity.defn
async def send_reminder(customer: str) -> str:
    CALLS.append(customer)
    return f"reminded {customer}"


@workflow.defn
class Reminder:
    def __init__(self) -> None:
        self.notes: list[str] = []

    @workflow.signal
    def note(self, text: str) -> None:
        self.notes.append(text)

    @workflow.run
    async def run(self, customer: str) -> dict:
        await workflow.sleep(timedelta(hours=1))
        sent = await workflow.execute_activity(send_reminder, customer, start_to_close_timeout=timedelta(seconds=30))
        return {"sent": sent, "notes": self.notes}


async def main() -> None:
    async with WorkflowEnvironment(workflows=[Reminder], activities=[send_reminder]) as env:
        handle = await env.client.start_workflow(Reminder, "ann", id="reminder-ann", task_queue="reminders")
        await env.sleep(1)

        # pause: the hour passes, but the timer is held and nothing is sent; signals still arrive
        await handle.pause(reason="the mail provider is down")
        await handle.signal("note", "check the address")
        await env.sleep(2 * 3600)
        described = await handle.describe()
        print(f"paused: {described['paused']}, timers held: {described['held_timers']}, reminders sent: {len(CALLS)}")

        # unpause: the held timer fires now, and the run goes on
        await handle.unpause(reason="provider is back")
        print("result:", await handle.result())

        # a closed run can be reset; the dry run is the engine's own answer, and changes nothing
        first = next(e["seq"] for e in await handle.history() if e["type"] == "WorkflowTaskCompleted")
        plan = await handle.plan_reset(to_event=first)
        print(
            f"plan: branch at event {plan.branch_event} of a {plan.from_status} run, "
            f"{plan.kept_events} events kept, terminates an open run: {plan.terminates_run_id is not None}"
        )
        try:
            await handle.plan_reset(to_event=2)
        except ResetRejectedError as exc:
            print("refused:", exc)
        new = await handle.reset(to_event=first, reason="send it again")
        await env.sleep(3600)
        print("new run's result:", await new.result(), "| reminders sent:", len(CALLS))


if __name__ == "__main__":
    asyncio.run(main())
