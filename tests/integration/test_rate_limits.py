"""Rate limits per key on the real broker (issue 46 item 3, decision 0058): runs under a start
rate and activities under a call rate, while a processor is SIGKILLed (every partition moves to
the other): the admissions recorded in the histories keep every window to the limit, nothing
starts before its admission, the limit is reached (the test would prove nothing otherwise),
everything is delayed rather than dropped, and every workflow has one run and every activity
one execution."""

from __future__ import annotations

import asyncio
import collections
import time
from datetime import timedelta

from kadence import Limit, Worker, activity, workflow
from kadence.topics.concurrency_reader import read_limits

from .conftest import wait_until
from .invariants import check_history, histories

#: key -> (workflow ID, wall-clock millisecond) of each activity execution's beginning
calls: dict[str, list[tuple[str, int]]] = collections.defaultdict(list)

SECOND = timedelta(seconds=1)


@activity.defn
async def call_api(key: str) -> str:
    calls[key].append((activity.info().workflow_id, int(time.time() * 1000)))
    return key


@workflow.defn
class Paced:
    @workflow.run
    async def run(self, key: str) -> str:
        return await workflow.execute_activity(
            call_api,
            key,
            start_to_close_timeout=timedelta(seconds=60),
            concurrency=[Limit("api", "partner", max=4, per=SECOND)],
        )


def admissions(config) -> tuple[dict[str, dict[str, int]], dict[str, int], list[str]]:
    """From the histories: per limit name, each workflow's admission time; how many runs each
    workflow had; and the runs whose first workflow task came before their admission (an
    activity's execution is checked against its admission by the test, from ``calls``)."""
    out: dict[str, dict[str, int]] = collections.defaultdict(dict)
    runs: collections.Counter[str] = collections.Counter()
    early = []
    for (wf, _run), events in histories(config).items():
        assert not check_history(events), (wf, check_history(events))
        runs[wf] += 1
        for e in events:
            kind, attrs = e["attributes"]
            if kind == "ConcurrencySlotAcquired" and attrs["not_before_ms"] is not None:
                assert wf not in out[attrs["name"]], f"{wf} admitted twice by {attrs['name']}"
                out[attrs["name"]][wf] = attrs["not_before_ms"]
                if attrs["activity_id"] is None:
                    first = next(x for x in events if x["attributes"][0] == "WorkflowTaskScheduled")
                    if first["timestamp_ms"] < attrs["not_before_ms"]:
                        early.append(wf)
    return dict(out), dict(runs), early


def most_in_a_window(times: list[int], window_ms: int) -> int:
    times = sorted(times)
    return max((sum(1 for t in times[i:] if t < start + window_ms) for i, start in enumerate(times)), default=0)


async def test_rates_hold_across_a_processor_kill_and_nothing_is_dropped(client, processors, kafka_config):
    calls.clear()
    processors.start("p0")
    processors.start("p1")
    processors.start_timers()  # a delayed run or activity waits on a durable timer
    n = 40
    # every run is admitted by the start rate (5/s), then its activity by the call rate (4/s)
    handles = [
        await client.start_workflow(
            Paced, "partner", id=f"r-{i}", task_queue="q", concurrency=[Limit("signup", "eu", max=5, per=SECOND)]
        )
        for i in range(n)
    ]
    last = client.get_workflow_handle(f"r-{n - 1}")
    deadline = time.monotonic() + 30
    while (await last.describe()).throttled_until is None and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert (await last.describe()).throttled_until is not None, "the last of 40 runs at 5/s was not delayed"
    async with Worker(client, task_queue="q", workflows=[Paced], activities=[call_api]):
        await wait_until(lambda: len(calls["partner"]) >= 10, 90, "10 calls")
        processors.kill("p0")  # its partitions (and the keys they own) move to p1
        await wait_until(lambda: len(calls["partner"]) >= 18, 90, "calls to go on after p0 was killed")
        processors.start("p0")
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 180)
    assert results == ["partner"] * n
    assert len(calls["partner"]) == n, "an activity ran twice or not at all"
    admitted, runs, early = await asyncio.to_thread(admissions, kafka_config)
    assert runs == {f"r-{i}": 1 for i in range(n)}, "a delayed run was lost or started twice"
    assert early == [], f"runs whose code ran before their admission: {early}"
    assert len(admitted["signup"]) == n and len(admitted["api"]) == n
    assert most_in_a_window(list(admitted["signup"].values()), 1000) == 5, "start rate exceeded or never reached"
    assert most_in_a_window(list(admitted["api"].values()), 1000) == 4, "call rate exceeded or never reached"
    # the calls themselves: none before its admission (the processors' clock is this machine's)
    for wf, at in calls["partner"]:
        assert at >= admitted["api"][wf], (wf, at, admitted["api"][wf])
    began = sorted(at for _wf, at in calls["partner"])
    assert began[-1] - began[0] >= (n - 4) / 4 * 1000  # 40 calls at 4 a second: 9 s at least
    shown = {(lim["key"], lim["kind"]): lim for lim in await asyncio.to_thread(read_limits, kafka_config)}
    assert shown[("api=partner", "rate")]["granted"] == n and shown[("api=partner", "rate")]["per_seconds"] == 1
    assert shown[("signup=eu", "rate")]["max"] == 5
