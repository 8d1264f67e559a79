"""Workflow streams on the real broker (issue 47 item 2): an activity that publishes ten values
and fails twice leaves exactly its third attempt's ten to readers; a worker SIGKILLed after
publishing leaves nothing of that attempt; a stream read live, resumed after an event, and read
after the close gives every value once, in order; what {ns}.streams holds (read_committed) is
exactly that. Server-Sent Events: tests/integration/test_stream_events.py."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from kadence import RetryPolicy, Worker, workflow
from kadence.topics import Catalogue
from kadence.topics.scan import scan
from kadence.topics.streams import entry_of
from tests.support.streams import chatty

from .conftest import wait_until

T = timedelta(seconds=30)
FAST = RetryPolicy(initial_interval=timedelta(milliseconds=100))


@workflow.defn
class Narrator:
    def __init__(self) -> None:
        self.go = False

    @workflow.signal
    def start(self) -> None:
        self.go = True

    @workflow.run
    async def run(self, n: int) -> str:
        workflow.publish("progress", "waiting")
        await workflow.wait_condition(lambda: self.go)
        out = await workflow.execute_activity(chatty, n, start_to_close_timeout=T, retry_policy=FAST)
        workflow.publish("progress", out)
        return out


@workflow.defn
class Storyteller:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(
            "narrate",
            5,
            task_queue="story",
            start_to_close_timeout=timedelta(seconds=4),
            retry_policy=FAST,
            result_type=str,
        )


def _committed(config, workflow_id: str) -> list:
    out = []
    for msg in scan(config, Catalogue(config).streams, timeout=30):
        if msg.key() == workflow_id.encode():
            out.append(entry_of(msg))
    return out


async def _values(stream) -> list:
    return [event async for event in stream]


async def test_only_the_accepted_attempts_values_reach_readers_live_resumed_and_after_the_close(
    client, processors, kafka_config
):
    processors.start()
    processors.start_timers()
    async with Worker(client, task_queue="streams", workflows=[Narrator], activities=[chatty]):
        handle = await client.start_workflow(Narrator, 10, id="narrate-1", task_queue="streams")
        live = asyncio.ensure_future(_values(handle.stream()))  # every stream, from the run's start
        first = handle.stream("progress")
        assert (await first.__anext__()).value == "waiting"
        await first.aclose()
        await handle.signal(Narrator.start)
        assert await handle.result() == "done on attempt 3"
        seen = await asyncio.wait_for(live, 30)  # ends at the workflow's close
    expected = ["waiting"] + [f"attempt 3 token {i}" for i in range(10)] + ["done on attempt 3"]
    assert [e.value for e in seen] == expected
    assert [e.stream for e in seen] == ["progress"] + ["tokens"] * 10 + ["progress"]
    assert {e.attempt for e in seen if e.stream == "tokens"} == {3}
    ids = [e.id for e in seen]
    assert ids == sorted(set(ids))
    # read again after the close, and resumed after the fourth
    assert [e.value for e in await _values(handle.stream())] == expected
    assert [e.id for e in await _values(handle.stream(after=ids[3]))] == ids[4:]
    assert [e.value for e in await _values(handle.stream("tokens"))] == expected[1:11]
    # the topic itself, read_committed: the twelve values and the end, nothing of attempts 1 and 2
    committed = await asyncio.to_thread(_committed, kafka_config, "narrate-1")
    assert [(e.stream, e.value is None, e.end) for e in committed] == [
        *[(e.stream, False, False) for e in seen],
        ("", True, True),
    ]
    assert not any(e.attempt in (1, 2) for e in committed)


def _worker(config, effects: Path, hang: bool, log) -> subprocess.Popen:
    env = {
        **os.environ,
        "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap,
        "KADENCE_NAMESPACE": config.namespace,
        "KADENCE_TEST_EFFECTS": str(effects),
        "KADENCE_TEST_HANG": "1" if hang else "0",
    }
    cmd = [sys.executable, "-m", "kadence.cli", "worker", "--task-queue", "story"]
    return subprocess.Popen(
        [*cmd, "--module", "tests.integration.stream_activities"], env=env, stdout=log, stderr=subprocess.STDOUT
    )


async def test_a_worker_killed_after_publishing_leaves_nothing_of_its_attempt(
    client, processors, kafka_config, tmp_path
):
    processors.start()
    processors.start_timers()
    log = open(tmp_path / "workers.log", "w")
    first = _worker(kafka_config, tmp_path, True, log)
    second = None
    try:
        async with Worker(client, task_queue="tales", workflows=[Storyteller]):
            handle = await client.start_workflow(Storyteller, id="story-1", task_queue="tales")
            await wait_until(lambda: (tmp_path / "published").exists(), 60, "attempt 1 to publish")
            first.send_signal(signal.SIGKILL)
            first.wait(10)
            second = _worker(kafka_config, tmp_path, False, log)
            result = await handle.result(timeout=90)
            seen = await asyncio.wait_for(_values(handle.stream("story")), 30)
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(10)
        log.close()
    attempt = int(result.rsplit(" ", 1)[1])
    assert attempt >= 2, result
    assert [e.value for e in seen] == [f"attempt {attempt} line {i}" for i in range(5)]
    committed = await asyncio.to_thread(_committed, kafka_config, "story-1")
    assert {e.attempt for e in committed if not e.end} == {attempt}
    assert len(committed) == 6 and committed[-1].end
