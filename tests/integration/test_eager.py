"""Eager workflow tasks (decision 0031) on the real broker: an activity's result carries the
workflow's next task, run by the worker that holds the instance; the history is the one ordinary
workflow tasks leave, and replays."""

import asyncio

from kadence import Replayer, Worker, activity, workflow

from .invariants import check_history, histories
from .workflows import T, ThreeSteps, add, double, three_steps_result


def _kinds(events):
    return [e["attributes"][0] for e in events]


async def _run_three_steps(client, ids, *, eager: bool) -> Worker:
    async with Worker(
        client, task_queue="q", workflows=[ThreeSteps], activities=[add, double], eager_workflow_tasks=eager
    ) as worker:
        handles = [await client.start_workflow(ThreeSteps, i, id=wid, task_queue="q") for i, wid in enumerate(ids)]
        results = await asyncio.gather(*(h.result(timeout=60) for h in handles))
    assert results == [three_steps_result(i) for i in range(len(ids))]
    return worker


async def test_each_activity_result_carries_the_next_workflow_task(client, processors, kafka_config):
    processors.start()
    eager = await _run_three_steps(client, [f"eager-{i}" for i in range(4)], eager=True)
    plain = await _run_three_steps(client, [f"plain-{i}" for i in range(4)], eager=False)
    # through Kafka, only the start's workflow task: each of the three results carried the next
    assert eager.stats["eager_workflow_tasks"] == 12
    assert eager.stats["workflow_tasks"] == 4
    assert plain.stats["eager_workflow_tasks"] == 0 and plain.stats["workflow_tasks"] == 16
    runs = histories(kafka_config)
    replayer = Replayer(workflows=[ThreeSteps])
    for i in range(4):
        [eager_events] = [v for k, v in runs.items() if k[0] == f"eager-{i}"]
        [plain_events] = [v for k, v in runs.items() if k[0] == f"plain-{i}"]
        assert check_history(eager_events) == []
        assert _kinds(eager_events) == _kinds(plain_events)  # the same history, event for event
        assert replayer.replay(eager_events).ok
        # the eager tasks' completions name the command that carried them
        completed = [e for e in eager_events if e["attributes"][0] == "WorkflowTaskCompleted"]
        assert [e["request_id"] is not None for e in completed] == [False, True, True, True]


gates: dict[str, asyncio.Event] = {}


@activity.defn
async def wait_for_gate(gate: str, x: int) -> int:
    await gates[gate].wait()
    return x


@workflow.defn
class Pinged:
    def __init__(self):
        self.pings = 0

    @workflow.signal
    def ping(self):
        self.pings += 1

    @workflow.run
    async def run(self, n: int) -> list:
        first = await workflow.execute_activity(wait_for_gate, "first", n, start_to_close_timeout=T)
        second = await workflow.execute_activity(wait_for_gate, "second", n + 1, start_to_close_timeout=T)
        return [first, second, self.pings]


async def test_signals_racing_eager_tasks_change_no_result(client, processors, kafka_config):
    # A signal that reaches the engine while an activity runs schedules a workflow task; an eager
    # task the worker sends on the activity's result is refused if the worker had not answered
    # that task yet, and its instance is rebuilt from the whole history. Which of the two happens
    # first is a race here (signals and first results are sent together); either way every
    # result counts its signal and every history replays.
    gates.update(first=asyncio.Event(), second=asyncio.Event())
    processors.start()
    async with Worker(client, task_queue="q", workflows=[Pinged], activities=[wait_for_gate]) as worker:
        handles = [await client.start_workflow(Pinged, i, id=f"pinged-{i}", task_queue="q") for i in range(8)]

        async def open_first_gate():
            await asyncio.sleep(0)
            gates["first"].set()

        await asyncio.gather(open_first_gate(), *(h.signal("ping") for h in handles))
        gates["second"].set()  # every signal is recorded before the workflows can close
        results = await asyncio.gather(*(h.result(timeout=60) for h in handles))
    assert results == [[i, i + 1, 1] for i in range(8)]
    assert worker.stats["eager_workflow_tasks"] >= 1
    runs = histories(kafka_config)
    replayer = Replayer(workflows=[Pinged])
    for i in range(8):
        [events] = [v for k, v in runs.items() if k[0] == f"pinged-{i}"]
        assert check_history(events) == []
        result = replayer.replay(events)
        assert result.ok, result
    print(
        f"eager tasks {worker.stats['eager_workflow_tasks']}; instances discarded (eager task refused or "
        f"unconfirmed) {worker.stats['eager_discarded']}; history requests {worker.stats['history_requests']}"
    )
