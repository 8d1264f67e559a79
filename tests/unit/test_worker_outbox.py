"""Commands of tasks that finish in one turn of the worker's event loop are produced together
(decision 0028), in the order the tasks finished, and each task's offset advances only once its
command is acknowledged."""

import asyncio
import concurrent.futures as cf
from types import SimpleNamespace

from kadence import Worker, activity


@activity.defn
async def noop() -> None:
    return None


class FakeEngine:
    def __init__(self):
        self.sent: list[tuple] = []
        self.bodies: list[dict] = []
        self.futures: list[cf.Future] = []

    def send(self, workflow_id, body_type, body, *, request_id, run_id=None, expect_reply=True, trace=None):
        if body.get("too_large") and body_type != "RespondActivityTaskFailed":
            raise RuntimeError("Broker: Message size too large")
        self.sent.append((workflow_id, body_type, body["n"]))
        self.bodies.append(body)
        fut = cf.Future()
        self.futures.append(fut)
        return fut


class Done:
    def __init__(self):
        self.records: list = []

    def done(self, msg):
        self.records.append(msg)


def test_commands_of_one_loop_turn_go_out_together_and_offsets_wait_for_delivery():
    engine = FakeEngine()
    worker = Worker(
        SimpleNamespace(engine=engine, config=SimpleNamespace(namespace="n"), interceptors=(), converter=None),
        task_queue="q",
        activities=[noop],
    )
    consumer = Done()

    async def scenario():
        for n in range(3):
            worker._send(
                {"workflow_id": f"wf-{n}", "run_id": "r"},
                "RespondActivityTaskCompleted",
                {"n": n},
                f"msg-{n}",
                consumer,
            )
        assert engine.sent == []  # queued until the next turn
        await asyncio.sleep(0)
        assert [s[0] for s in engine.sent] == ["wf-0", "wf-1", "wf-2"]
        worker._send(
            {"workflow_id": "wf-3", "run_id": "r"}, "RespondActivityTaskCompleted", {"n": 3}, "msg-3", consumer
        )
        await asyncio.sleep(0)
        assert len(engine.sent) == 4  # a later turn: its own flush

    asyncio.run(scenario())
    assert consumer.records == []  # nothing acknowledged yet: no offset may advance
    engine.futures[1].set_result(None)
    engine.futures[0].set_exception(RuntimeError("broker gone"))
    assert consumer.records == ["msg-1"]  # the failed one stays uncommitted (redelivered)


def test_a_command_that_cannot_be_produced_does_not_hold_back_the_others_of_its_turn():
    engine = FakeEngine()
    worker = Worker(
        SimpleNamespace(engine=engine, config=SimpleNamespace(namespace="n"), interceptors=(), converter=None),
        task_queue="q",
        activities=[noop],
    )
    consumer = Done()

    async def scenario():
        for n, big in ((0, False), (1, True), (2, False)):
            worker._send(
                {"workflow_id": f"wf-{n}", "run_id": "r"},
                "RespondWorkflowTaskCompleted",
                {"n": n, "too_large": big},
                f"msg-{n}",
                consumer,
            )
        await asyncio.sleep(0)

    asyncio.run(scenario())
    assert [s[0] for s in engine.sent] == ["wf-0", "wf-2"]
    assert consumer.records == ["msg-1"]  # given up at once, like a task that fails in the worker


def test_an_activity_result_that_cannot_be_sent_fails_the_activity_without_retries():
    engine = FakeEngine()
    worker = Worker(
        SimpleNamespace(engine=engine, config=SimpleNamespace(namespace="n"), interceptors=(), converter=None),
        task_queue="q",
        activities=[noop],
    )
    consumer = Done()
    common = {"activity_id": "a1", "scheduled_seq": 5, "attempt": 1, "identity": "w"}

    async def scenario():
        worker._send(
            {"workflow_id": "wf-0", "run_id": "r"},
            "RespondActivityTaskCompleted",
            {**common, "n": 0, "too_large": True, "result": b"x" * 10},
            "msg-0",
            consumer,
        )
        await asyncio.sleep(0)

    asyncio.run(scenario())
    assert [(s[0], s[1]) for s in engine.sent] == [("wf-0", "RespondActivityTaskFailed")]
    failed = engine.bodies[0]
    assert "result" not in failed and failed["activity_id"] == "a1" and failed["scheduled_seq"] == 5
    assert failed["failure"]["type"] == "ResultNotSent" and failed["failure"]["non_retryable"] is True
    assert "Message size too large" in failed["failure"]["message"]
    assert consumer.records == []  # its offset advances when the failure is acknowledged
    engine.futures[0].set_result(None)
    assert consumer.records == ["msg-0"]
