"""One workflow end to end on the real broker: start, activities, result, history."""

import asyncio

import pytest

from kadence import ActivityError, KadenceError, Worker, WorkflowAlreadyStartedError, WorkflowFailureError
from kadence.processors.outputs import reply_partition
from kadence.samples import order_fulfilment as sample
from kadence.topics import Catalogue

from .invariants import check_history, histories, read_topic
from .workflows import EFFECTS, Failing, HugeResult, ThreeSteps, add, boom, double, huge_result, three_steps_result


async def test_sample_order_fulfilment_completes_with_its_history(client, processors):
    processors.start()
    async with Worker(client, task_queue=sample.TASK_QUEUE, workflows=sample.WORKFLOWS, activities=sample.ACTIVITIES):
        handle = await client.start_workflow(
            sample.OrderFulfilment, sample.SAMPLE_ORDER, id="order-1", task_queue=sample.TASK_QUEUE
        )
        result = await handle.result(timeout=60)
    assert result["charged_cents"] == 6500 and result["items"] == 3
    assert result["tracking"] == "trk-A-1001"
    events = await handle.history()
    kinds = [e["type"] for e in events]
    assert kinds[0] == "WorkflowExecutionStarted" and kinds[-1] == "WorkflowExecutionCompleted"
    assert [e["attributes"]["activity_type"] for e in events if e["type"] == "ActivityTaskScheduled"] == [
        "reserve_stock",
        "charge_payment",
        "ship_order",
        "send_confirmation",
    ]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["attributes"]["result"] == result


async def test_same_workflow_id_and_request_id_runs_once(client, processors, kafka_config):
    processors.start()
    async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double]):
        first = await client.start_workflow(ThreeSteps, 1, id="dup-1", task_queue="q", request_id="key-1")
        again = await client.start_workflow(ThreeSteps, 1, id="dup-1", task_queue="q", request_id="key-1")
        assert again.run_id == first.run_id
        assert await first.result(timeout=60) == three_steps_result(1)
        # a retry after completion still gets the first answer, not a second run
        late = await client.start_workflow(ThreeSteps, 1, id="dup-1", task_queue="q", request_id="key-1")
        assert late.run_id == first.run_id
    runs = [k for k in histories(kafka_config) if k[0] == "dup-1"]
    assert runs == [("dup-1", first.run_id)]
    starts = [e for e in histories(kafka_config)[runs[0]] if e["attributes"][0] == "WorkflowExecutionStarted"]
    assert len(starts) == 1


async def test_an_instance_writes_every_reply_to_its_own_replies_partition(client, processors, kafka_config):
    # decision 0029: where a reply lands does not matter to its reader (clients read every
    # partition and match the request ID), so one partition per instance saves each transaction
    # a request per other partition
    processors.start("p0")
    handles = [
        await client.start_workflow(ThreeSteps, i, id=f"rp-{i}", task_queue="q", request_id=f"req-{i}")
        for i in range(8)
    ]
    assert len({h.run_id for h in handles}) == 8  # every start was answered
    topic = Catalogue(kafka_config).replies
    replies = read_topic(kafka_config, topic, "Reply")
    ours = [(p, v["request_id"]) for _k, v, p, _o in replies if v["request_id"].startswith("req-")]
    assert sorted(r for _p, r in ours) == [f"req-{i}" for i in range(8)]
    partitions = len(client.engine._reply_partitions)
    assert partitions > 1  # otherwise this test shows nothing
    assert {p for p, _r in ours} == {reply_partition("p0", partitions)}


async def test_second_start_of_a_running_workflow_is_rejected_with_its_run_id(client, processors):
    processors.start()
    first = await client.start_workflow(ThreeSteps, 1, id="dup-2", task_queue="q", request_id="a")
    with pytest.raises(WorkflowAlreadyStartedError) as info:
        await client.start_workflow(ThreeSteps, 1, id="dup-2", task_queue="q", request_id="b")
    assert info.value.run_id == first.run_id


async def test_activity_failure_fails_the_workflow_with_its_cause(client, processors, kafka_config):
    processors.start()
    processors.start_timers()  # the retry backoff is a durable timer
    async with Worker(client, task_queue="q", workflows=[Failing], activities=[boom]):
        handle = await client.start_workflow(Failing, "card declined", id="fail-1", task_queue="q")
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result(timeout=60)
    failure = info.value.failure
    assert failure["type"] == "ActivityError"
    assert failure["cause"]["type"] == "ValueError" and failure["cause"]["message"] == "card declined"
    assert isinstance(info.value.__cause__, ActivityError)
    [(_key, events)] = [(k, v) for k, v in histories(kafka_config).items() if k[0] == "fail-1"]
    assert check_history(events) == []
    kinds = [e["attributes"][0] for e in events]
    assert kinds.count("ActivityTaskAttemptFailed") == 1 and kinds.count("ActivityTaskFailed") == 1
    assert kinds[-1] == "WorkflowExecutionFailed"


async def test_many_workflows_complete_and_each_activity_runs_once(client, processors, kafka_config):
    processors.start()
    EFFECTS.clear()
    n = 50
    async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double]):
        handles = await asyncio.gather(
            *(client.start_workflow(ThreeSteps, i, id=f"many-{i}", task_queue="q") for i in range(n))
        )
        results = await asyncio.gather(*(h.result(timeout=120) for h in handles))
    assert results == [three_steps_result(i) for i in range(n)]
    runs = histories(kafka_config)
    assert len(runs) == n
    for key, events in runs.items():
        assert check_history(events) == [], key
    assert len(EFFECTS) == 3 * n and set(EFFECTS.values()) == {1}


async def test_execute_workflow_returns_the_result_and_raises_what_start_and_result_raise(client, processors):
    processors.start()
    processors.start_timers()  # Failing's retry backoff is a durable timer
    async with Worker(client, task_queue="q", workflows=[ThreeSteps, Failing], activities=[add, double, boom]):
        assert await client.execute_workflow(
            ThreeSteps, 2, id="ex-1", task_queue="q", request_id="ex-key", result_timeout=60
        ) == three_steps_result(2)
        # a retry of the same request after the run closed: the same run's result, no second run
        assert await client.execute_workflow(
            ThreeSteps, 2, id="ex-1", task_queue="q", request_id="ex-key", result_timeout=60
        ) == three_steps_result(2)
        with pytest.raises(WorkflowFailureError):
            await client.execute_workflow(Failing, "card declined", id="ex-2", task_queue="q", result_timeout=60)
    # not started while one is open: the start's error, at once (the result request is abandoned)
    running = await client.start_workflow(ThreeSteps, 1, id="ex-3", task_queue="q")
    with pytest.raises(WorkflowAlreadyStartedError) as info:
        await client.execute_workflow(ThreeSteps, 1, id="ex-3", task_queue="q", result_timeout=60)
    assert info.value.run_id == running.run_id
    assert not client.engine._pending  # nothing left waiting
    with pytest.raises(KadenceError):  # bad input: a clear error, nothing sent
        await client.execute_workflow(ThreeSteps, 1, id="", task_queue="q")


async def test_an_activity_result_too_large_to_send_fails_the_activity_once(client, processors):
    processors.start()
    async with Worker(client, task_queue="q", workflows=[HugeResult], activities=[huge_result]):
        assert (
            await client.execute_workflow(HugeResult, id="huge-1", task_queue="q", result_timeout=60)
            == "1 ResultNotSent"
        )
