"""Workflow streams on the real state machine (``kadence.testing``, no broker): workflow code's
values once each, in order, not again on replay; an activity's values only from the attempt the
engine accepted; the stream ends when the workflow closes; bad input is a typed error."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kadence import InvalidIdentifierError, PayloadTooLargeError, RetryPolicy, workflow
from kadence.processors.effects import BatchView, Outbox, Transition
from kadence.processors.streams import end_streams, publish_from_activity
from kadence.testing import WorkflowEnvironment
from tests.support.streams import chatty

T = timedelta(seconds=10)


@workflow.defn
class Narrator:
    @workflow.run
    async def run(self, n: int) -> str:
        workflow.publish("progress", {"step": "start"})
        out = await workflow.execute_activity(
            chatty, n, start_to_close_timeout=T, retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=1))
        )
        workflow.publish("progress", {"step": "end", "result": out})
        return out


@workflow.defn
class Silent:
    @workflow.run
    async def run(self) -> str:
        return "nothing published"


@workflow.defn
class BadName:
    @workflow.run
    async def run(self, name: str) -> str:
        try:
            workflow.publish(name, 1)
        except InvalidIdentifierError as exc:
            return f"refused: {exc}"
        return "published"


async def _all(stream) -> list:
    return [event async for event in stream]


async def test_an_activity_publishes_only_with_its_accepted_attempt_and_workflow_values_once():
    async with WorkflowEnvironment(workflows=[Narrator], activities=[chatty]) as env:
        handle = await env.client.start_workflow(Narrator, 10, id="narrate-1", task_queue="q")
        assert await handle.result() == "done on attempt 3"
        tokens = await _all(handle.stream("tokens"))
        assert [e.value for e in tokens] == [f"attempt 3 token {i}" for i in range(10)]
        assert {(e.activity_id, e.attempt) for e in tokens} == {("1", 3)}
        progress = await _all(handle.stream("progress"))
        assert [e.value for e in progress] == [{"step": "start"}, {"step": "end", "result": "done on attempt 3"}]
        assert all(e.activity_id is None for e in progress)
        every = await _all(handle.stream())  # every stream, in the order the engine accepted them
        assert [e.stream for e in every] == ["progress"] + ["tokens"] * 10 + ["progress"]
        assert [e.id for e in every] == sorted(e.id for e in every)
        # resumed after the fifth: the rest, nothing twice
        rest = await _all(handle.stream(after=every[4].id))
        assert [e.id for e in rest] == [e.id for e in every[5:]]
        # the history records the workflow's publishes (names only) and nothing of the failed attempts
        events = await handle.history()
        published = [e for e in events if e["type"] == "StreamRecordPublished"]
        assert [e["attributes"]["stream"] for e in published] == ["progress", "progress"]
        # what the engine holds: 12 values and one end, none from attempts 1 and 2
        mine = [e for e in env.engine.streams if e.workflow_id == "narrate-1"]
        assert len(mine) == 13 and mine[-1].end and not any(e.attempt in (1, 2) for e in mine)
        assert (await handle.describe()).streams_used


async def test_a_closed_workflow_that_never_published_has_an_empty_stream():
    async with WorkflowEnvironment(workflows=[Silent]) as env:
        handle = await env.client.start_workflow(Silent, id="silent-1", task_queue="q")
        assert await handle.result() == "nothing published"
        assert await _all(handle.stream("progress")) == []
        assert not (await handle.describe()).streams_used


async def test_a_bad_stream_name_is_a_typed_error_in_the_code_and_in_the_reader():
    async with WorkflowEnvironment(workflows=[BadName]) as env:
        result = await env.client.execute_workflow(BadName, "", id="bad-1", task_queue="q")
        assert result.startswith("refused: stream must not be empty")
        handle = env.client.get_workflow_handle("bad-1")
        with pytest.raises(InvalidIdentifierError):
            handle.stream("a\x00b")


def test_a_value_over_the_limit_is_refused_before_anything_is_sent():
    from kadence.topics.streams import MAX_VALUE_BYTES, PublishBuffer

    buf = PublishBuffer()
    with pytest.raises(PayloadTooLargeError):
        buf.add("s", b"x" * (MAX_VALUE_BYTES + 1))
    for _ in range(3):
        buf.add("s", b"x" * 200_000)
    with pytest.raises(PayloadTooLargeError):  # 768 KiB an attempt in all
        buf.add("s", b"x" * 200_000)
    assert len(buf.items) == 3


def _state(**kw):
    st = {"workflow_id": "w", "run_id": "r", "next_seq": 7, "streams_used": False}
    st.update(kw)
    return st


def test_the_end_record_is_written_only_for_a_workflow_that_published():
    out = Outbox()
    t = Transition({"aggregate_key": "w"}, BatchView.__new__(BatchView), out, 1000)  # type: ignore[arg-type]
    quiet = _state()
    end_streams(t, quiet)  # type: ignore[arg-type]
    assert out.streams == []
    talker = _state()
    publish_from_activity(t, talker, [{"stream": "s", "value": b"1"}], "a1", 2, 5)  # type: ignore[arg-type]
    end_streams(t, talker)  # type: ignore[arg-type]
    assert [(r["stream"], r["end"], r["history_seq"]) for r in out.streams] == [("s", False, 5), ("", True, 6)]
    assert out.streams[0]["activity_id"] == "a1" and out.streams[0]["attempt"] == 2


@workflow.defn(name="Narrator")
class RenamedStream:  # the same workflow type with its first publish on another stream
    @workflow.run
    async def run(self, n: int) -> str:
        workflow.publish("status", {"step": "start"})
        return await workflow.execute_activity(chatty, n, start_to_close_timeout=T)


async def test_a_replay_matches_the_publishes_and_publishes_nothing_again():
    from kadence import NonDeterminismError, Replayer

    async with WorkflowEnvironment(workflows=[Narrator], activities=[chatty]) as env:
        handle = await env.client.start_workflow(Narrator, 2, id="narrate-2", task_queue="q")
        await handle.result()
        raw = await handle.history(raw=True)
        written = len(env.engine.streams)
    assert Replayer(workflows=[Narrator]).replay(raw).ok
    assert len(env.engine.streams) == written  # a replay writes nothing
    with pytest.raises(NonDeterminismError, match="stream='status'"):
        Replayer(workflows=[RenamedStream]).replay(raw)
