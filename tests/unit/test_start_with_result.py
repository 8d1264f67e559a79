"""A start that carries its result request (``StartWorkflow.result_request_id``, what
``execute_workflow`` sends since decision 0052): the result is answered once when the workflow
closes, a resent start does not register it twice, and a start of a workflow that closed (or a
resend after the close) is answered at once."""

from __future__ import annotations

from kadence import activity, workflow
from kadence.topics.payload import JsonConverter

from .engine_harness import Driver

conv = JsonConverter()


@activity.defn
async def double(x: int) -> int:
    return 2 * x


@workflow.defn
class Doubler:
    @workflow.run
    async def run(self, x: int) -> int:
        return await workflow.execute_activity(double, x)


def _start(d: Driver, request_id: str = "s-1") -> None:
    d.h.send(
        "wf",
        "StartWorkflow",
        {"workflow_type": "Doubler", "task_queue": "q", "input": conv.to_bytes([21]), "result_request_id": "res-1"},
        request_id=request_id,
    )


def _answers(d: Driver, request_id: str) -> list[dict]:
    return [r for r in d.h.replies if r["request_id"] == request_id]


def test_the_result_is_answered_once_when_the_workflow_closes():
    d = Driver(Doubler, activity_fn=lambda task, args: ("ok", 2 * args[0]))
    _start(d)
    _start(d)  # the client's resend of the same start, before anything ran
    assert _answers(d, "res-1") == []
    d.run()
    [answer] = _answers(d, "res-1")
    assert answer["status"] == "completed" and conv.from_bytes(answer["result"]) == 42
    assert [r["status"] for r in _answers(d, "s-1")] == ["ok", "ok"]  # the duplicate got the first answer
    _start(d)  # resent after the close: answered at once, from the closed run
    assert [r["status"] for r in _answers(d, "res-1")] == ["completed", "completed"]


def test_a_refused_start_registers_no_result_request():
    d = Driver(Doubler, activity_fn=lambda task, args: ("ok", 2 * args[0]))
    d.h.start("wf", "Doubler", [1], request_id="first")
    _start(d, request_id="second")  # the ID is in use: already_started
    assert [r["status"] for r in _answers(d, "second")] == ["already_started"]
    d.run()
    assert _answers(d, "res-1") == []
