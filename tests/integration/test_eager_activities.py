"""Eager activities (decision 0054) on the real broker: an activity the worker's own workflow
task schedules comes back in the engine's reply to the completion and runs at once; its result
is a plain produce. The history is the one the activity-task topic leaves, and replays; a worker
that goes away with an eager attempt leaves it to its start-to-close timeout, after which the
next attempt goes through the topic to another worker."""

import asyncio
from datetime import timedelta

from kadence import Replayer, Worker, activity, workflow

from .invariants import check_history, histories
from .workflows import ThreeSteps, add, double, three_steps_result


def _kinds(events):
    return [e["attributes"][0] for e in events]


async def _three_steps(client, ids, **options) -> Worker:
    async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double], **options) as worker:
        handles = [await client.start_workflow(ThreeSteps, i, id=wid, task_queue="q") for i, wid in enumerate(ids)]
        results = await asyncio.gather(*(h.result(timeout=60) for h in handles))
    assert results == [three_steps_result(i) for i in range(len(ids))]
    return worker


async def test_every_activity_of_a_workflow_runs_eagerly_and_the_history_is_unchanged(client, processors, kafka_config):
    processors.start()
    eager = await _three_steps(client, [f"ea-{i}" for i in range(4)])
    plain = await _three_steps(client, [f"pa-{i}" for i in range(4)], eager_activities=False)
    # the first activity from the workflow task's completion, the next two from the eager
    # workflow tasks their predecessors' results carried: none through the task topic
    assert eager.stats["eager_activities"] == 12, eager.stats
    assert eager.stats["eager_activities_declined"] == 0
    assert plain.stats["eager_activities_asked"] == 0 and plain.stats["activities_completed"] == 12
    runs = histories(kafka_config)
    replayer = Replayer(workflows=[ThreeSteps])
    for i in range(4):
        [eager_events] = [v for k, v in runs.items() if k[0] == f"ea-{i}"]
        [plain_events] = [v for k, v in runs.items() if k[0] == f"pa-{i}"]
        assert check_history(eager_events) == []
        assert _kinds(eager_events) == _kinds(plain_events)
        assert replayer.replay(eager_events).ok
        attempts = [
            e["attributes"][1]["attempt"] for e in eager_events if e["attributes"][0] == "ActivityTaskCompleted"
        ]
        assert attempts == [1, 1, 1]


started = asyncio.Event()


@activity.defn
async def hold(x: int) -> int:
    if activity.info().attempt == 1:
        started.set()
        await asyncio.Event().wait()  # until the worker's shutdown cancels it
    return x * 10


@workflow.defn
class Held:
    @workflow.run
    async def run(self, x: int) -> int:
        return await workflow.execute_activity(hold, x, start_to_close_timeout=timedelta(seconds=2))


async def test_an_eager_attempt_whose_worker_leaves_is_retried_through_the_topic(client, processors, kafka_config):
    processors.start()
    processors.start_timers()  # the retry's backoff
    started.clear()
    first = Worker(client, task_queue="q", workflows=[Held], activities=[hold])
    await first.__aenter__()
    handle = await client.start_workflow(Held, 7, id="held", task_queue="q")
    await asyncio.wait_for(started.wait(), 30)
    assert first.stats["eager_activities"] == 1
    await first.__aexit__(None, None, None)  # the attempt is cancelled, nothing is reported
    async with Worker(client, task_queue="q", workflows=[Held], activities=[hold], eager_activities=False) as second:
        assert await handle.result(timeout=60) == 70
    assert second.stats["activities_completed"] == 1
    [events] = [v for k, v in histories(kafka_config).items() if k[0] == "held"]
    assert check_history(events) == []
    failed = [e["attributes"][1] for e in events if e["attributes"][0] == "ActivityTaskAttemptFailed"]
    assert [(f["attempt"], f["timeout_type"]) for f in failed] == [(1, "start_to_close")]
    done = [e["attributes"][1] for e in events if e["attributes"][0] == "ActivityTaskCompleted"]
    assert [d["attempt"] for d in done] == [2]


@workflow.defn
class Fanned:
    @workflow.run
    async def run(self, n: int) -> list[int]:
        t = timedelta(seconds=30)
        return list(
            await asyncio.gather(*(workflow.execute_activity(double, i, start_to_close_timeout=t) for i in range(n)))
        )


async def test_a_worker_asks_for_no_more_than_its_free_slots(client, processors):
    processors.start()
    async with Worker(
        client, task_queue="q", workflows=[Fanned], activities=[double], max_concurrent_activities=2
    ) as worker:
        assert await client.execute_workflow(Fanned, 5, id="fanned", task_queue="q", timeout=60) == [0, 2, 4, 6, 8]
    # two of the five ran eagerly, three went through the topic
    assert worker.stats["eager_activities_asked"] == 2 and worker.stats["eager_activities"] == 2
    assert worker.stats["activities_completed"] == 5
