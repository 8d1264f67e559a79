"""``workflow.info().history_length`` and ``continue_as_new_suggested`` (Temporal's
``get_current_history_length()`` and ``is_continue_as_new_suggested()``): the length is the
place of the current workflow task in the history, so replay sees the same values."""

from __future__ import annotations

from kadence import Replayer, workflow
from kadence.testing import WorkflowEnvironment


@workflow.defn
class Lengths:
    def __init__(self) -> None:
        self.pings = 0
        self.seen: list[int] = []

    @workflow.signal
    def ping(self) -> None:
        self.pings += 1

    @workflow.run
    async def run(self, upto: int) -> list[int]:
        self.seen.append(workflow.info().history_length)
        while self.pings < upto:
            had = self.pings
            await workflow.wait_condition(lambda had=had: self.pings > had)
            self.seen.append(workflow.info().history_length)
        return self.seen


@workflow.defn
class Rolling:
    """Counts pings to 6 over as many runs as the suggestion asks for."""

    def __init__(self) -> None:
        self.pings = 0

    @workflow.signal
    def ping(self) -> None:
        self.pings += 1

    @workflow.run
    async def run(self, carried: int, runs: int) -> list[int]:
        await workflow.wait_condition(lambda: carried + self.pings >= 6 or workflow.info().continue_as_new_suggested)
        if carried + self.pings < 6:
            workflow.continue_as_new(carried + self.pings, runs + 1)
        return [carried + self.pings, runs]


async def test_each_task_sees_its_place_in_the_history_and_replay_sees_the_same():
    async with WorkflowEnvironment(workflows=[Lengths]) as env:
        handle = await env.client.start_workflow(Lengths, 3, id="lengths", task_queue="q")
        for _ in range(3):
            await handle.signal(Lengths.ping)
            await env.sleep(1)
        seen = await handle.result()
        events = await handle.history(raw=True)
    scheduled = [e["seq"] for e in events if e["attributes"][0] == "WorkflowTaskScheduled"]
    assert seen[0] == 2 and seen == sorted(seen) and set(seen) <= set(scheduled), (seen, scheduled)
    assert Replayer(workflows=[Lengths]).replay(events).ok


async def test_continue_as_new_suggested_from_the_engines_warning_length(monkeypatch):
    import kadence._instance as instance

    # a fresh run's first task is at event 2, each ping adds three (signaled, scheduled, completed)
    monkeypatch.setattr(instance, "HISTORY_WARN_EVENTS", 8)
    async with WorkflowEnvironment(workflows=[Rolling]) as env:
        handle = await env.client.start_workflow(Rolling, 0, 1, id="rolling", task_queue="q")
        for _ in range(6):
            await env.client.get_workflow_handle("rolling").signal(Rolling.ping)
            await env.sleep(1)
        total, runs = await handle.result()
    assert total == 6 and runs == 3, (total, runs)  # two pings a run: at event 8 it continued
