"""Concurrency limits on the real broker (issue 46 item 2, decision 0057): a limit of 3 per key
is never exceeded, counted from the histories and from the activities' own clocks, while each
processor is SIGKILLed in turn (every partition, the limit's owner among them, moves at least
once), and no waiting run is lost or started twice; a hierarchy (tenant 20 per run, api 5 per
activity) holds both."""

from __future__ import annotations

import asyncio
import collections
import json
import time
from datetime import timedelta

from kadence import Limit, Worker, activity, workflow
from kadence.topics.concurrency_reader import read_limits
from tests.support.cli import kadence

from .conftest import wait_until
from .invariants import check_history, histories

#: key -> [(monotonic start, monotonic end)] of every activity execution
executions: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)


@activity.defn
async def hold(key: str, seconds: float) -> str:
    t0 = time.monotonic()
    await asyncio.sleep(seconds)
    executions[key].append((t0, time.monotonic()))
    return key


@workflow.defn
class Guarded:
    """Runs one activity for its key; the limits are the start's (or, with ``api``, its
    activity's too)."""

    @workflow.run
    async def run(self, key: str, seconds: float, api: int = 0) -> str:
        limits = [Limit("api", "stripe", max=api)] if api else None
        return await workflow.execute_activity(
            hold, key, seconds, start_to_close_timeout=timedelta(seconds=60), concurrency=limits
        )


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The largest number of intervals that overlap at one moment (an end before a start at
    the same instant)."""
    points = sorted([(a, 1) for a, _b in intervals] + [(b, -1) for _a, b in intervals], key=lambda p: (p[0], p[1]))
    now = top = 0
    for _t, step in points:
        now += step
        top = max(top, now)
    return top


def holding_intervals(config, key: tuple[str, str]) -> tuple[list[tuple[int, int]], dict[str, int]]:
    """From the histories: per run that acquired ``key`` for itself, (acquired, closed) in event
    time; and how many runs each workflow had."""
    intervals, runs = [], collections.Counter()
    for (wf, _run), events in histories(config).items():
        assert not check_history(events), (wf, check_history(events))
        runs[wf] += 1
        acquired = next(
            (
                e["timestamp_ms"]
                for e in events
                if e["attributes"][0] == "ConcurrencySlotAcquired"
                and (e["attributes"][1]["name"], e["attributes"][1]["value"]) == key
                and e["attributes"][1]["activity_id"] is None
            ),
            None,
        )
        closed = next((e["timestamp_ms"] for e in events if e["attributes"][0] == "WorkflowExecutionCompleted"), None)
        if acquired is not None:
            assert closed is not None, f"{wf} acquired a slot and never closed"
            intervals.append((acquired, closed))
    return intervals, dict(runs)


async def test_a_limit_of_3_holds_across_processor_kills_and_partition_moves(client, processors, kafka_config):
    executions.clear()
    processors.start("p0")
    processors.start("p1")
    n = 24
    async with Worker(client, task_queue="q", workflows=[Guarded], activities=[hold]):
        handles = [
            await client.start_workflow(
                Guarded, "k3", 0.6, id=f"g-{i}", task_queue="q", concurrency=[Limit("tenant", "k3", max=3)]
            )
            for i in range(n)
        ]
        # each processor is killed in turn while runs hold and wait: every partition moves
        for name, done in (("p0", 3), ("p1", 9)):
            await wait_until(lambda n=done: len(executions["k3"]) >= n, 90, f"{done} runs to finish")
            processors.kill(name)
            await wait_until(
                lambda n=done: len(executions["k3"]) >= n + 3, 90, f"runs to go on after {name} was killed"
            )
            processors.start(name)
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 180)
    assert results == ["k3"] * n
    assert len(executions["k3"]) == n, "an activity ran twice or not at all"
    assert most_at_once(executions["k3"]) <= 3
    assert most_at_once(executions["k3"]) == 3, "the limit never filled: the test proves nothing"
    intervals, runs = await asyncio.to_thread(holding_intervals, kafka_config, ("tenant", "k3"))
    assert runs == {f"g-{i}": 1 for i in range(n)}, "a waiting run was lost or started twice"
    assert len(intervals) == n
    assert most_at_once(intervals) <= 3


async def test_a_hierarchy_holds_both_the_tenant_and_the_api_limit(client, processors, kafka_config):
    """60 runs of two tenants (tenant max 20 each run), whose activities share an API (max 5):
    at most 20 of a tenant's runs hold their slot at once, at most 5 activities call the API. The
    runs are started before any worker runs, so that the first 20 of the big tenant hold their
    slots together (else they finish as fast as they are started, and the limit is never met)."""
    executions.clear()
    processors.start("p0")
    handles = []
    for i in range(60):
        tenant = "acme" if i < 45 else "tiny"
        handles.append(
            await client.start_workflow(
                Guarded,
                f"api-{tenant}",
                0.25,
                5,
                id=f"h-{i}",
                task_queue="q",
                concurrency=[Limit("tenant", tenant, max=20)],
            )
        )

    def filled() -> bool:
        acme = [lim for lim in read_limits(kafka_config) if lim["key"] == "tenant=acme"]
        return bool(acme) and acme[0]["in_use"] == 20 and acme[0]["waiting"] == 25

    await wait_until(lambda: asyncio.to_thread(filled), 60, "20 acme runs holding their slots, 25 waiting")
    async with Worker(client, task_queue="q", workflows=[Guarded], activities=[hold], max_concurrent_activities=50):
        await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 180)
    api = executions["api-acme"] + executions["api-tiny"]
    assert len(api) == 60
    assert most_at_once(api) == 5, "the api limit was exceeded, or never reached"
    for tenant in ("acme", "tiny"):
        intervals, _runs = await asyncio.to_thread(holding_intervals, kafka_config, ("tenant", tenant))
        assert most_at_once(intervals) <= 20
    acme, _runs = await asyncio.to_thread(holding_intervals, kafka_config, ("tenant", "acme"))
    assert most_at_once(acme) == 20


async def test_a_waiting_run_says_what_it_waits_for_and_kadence_limits_shows_the_queue(
    client, processors, kafka_config
):
    """No worker: the first run holds the slot, the others wait in order. describe, the reader
    and ``kadence limits`` say so; ``kadence start --limit`` joins the queue; a bad --limit is a
    usage error that starts nothing."""
    processors.start()
    one = [Limit("one", "x", max=1)]
    for i in range(3):
        await client.start_workflow(Guarded, "x", 0.0, id=f"w-{i}", task_queue="nobody", concurrency=one)
    code, out, err = await kadence(
        kafka_config,
        "start",
        "Guarded",
        "--id",
        "w-3",
        "--task-queue",
        "nobody",
        "--input",
        '["x", 0]',
        "--limit",
        "one=x:1",
    )
    assert code == 0, err
    last = client.get_workflow_handle("w-3")
    await wait_until(lambda: _waits(last), 60, "the CLI's run to wait for its slot")
    assert (await last.describe()).waiting_for_slot["reason"] == (
        "waiting for a slot of one=x: 1 of 1 in use, 2 waiting before it"
    )
    first = await client.get_workflow_handle("w-0").describe()
    assert first.concurrency_slots == [{"key": "one=x", "max": 1}] and first.waiting_for_slot is None
    (shown,) = await asyncio.to_thread(read_limits, kafka_config)
    assert (shown["key"], shown["in_use"], shown["waiting"]) == ("one=x", 1, 3)
    assert [w["workflow_id"] for w in shown["waiters"]] == ["w-1", "w-2", "w-3"]
    code, out, err = await kadence(kafka_config, "limits", "describe", "one=x")
    assert code == 0, err
    assert out.startswith("one=x: 1 of 1 in use, 3 waiting") and out.index("w-1") < out.index("w-3")
    code, out, err = await kadence(kafka_config, "limits", "list", "-o", "json")
    assert code == 0 and json.loads(out)["items"][0]["waiting"] == 3
    code, _out, err = await kadence(
        kafka_config, "start", "Guarded", "--id", "w-bad", "--task-queue", "nobody", "--limit", "one=x"
    )
    assert code == 2 and "NAME=VALUE:MAX" in err
    code, _out, err = await kadence(
        kafka_config, "start", "Guarded", "--id", "w-bad", "--task-queue", "nobody", "--limit", "one=x:0"
    )
    assert code == 1 and "max must be" in err
    assert (await asyncio.to_thread(read_limits, kafka_config))[0]["waiting"] == 3


async def _waits(handle) -> bool:
    """The run waits for a slot of one=x, third in line (describe reads the owner's queue)."""
    slot = (await handle.describe()).waiting_for_slot
    return slot is not None and slot["key"] == "one=x" and slot.get("waiting_before") == 2


async def test_an_operators_queue_rule_limits_activities_that_name_none(client, processors, kafka_config):
    """``kadence queues set-limit q -c hold=2``: 8 runs whose activity names no limit, at most 2 of
    the activities at once; describe shows the rule; lifting it lifts it for what comes next."""
    executions.clear()
    code, out, err = await kadence(kafka_config, "queues", "set-limit", "q", "-c", "hold=2", "--reason", "the API")
    assert code == 0 and "hold<=2 at once" in out, err
    code, _out, err = await kadence(kafka_config, "queues", "set-limit", "q", "-c", "hold=0")
    assert code == 2 and "whole number" in err
    processors.start()  # it reads the rule when it starts (and follows changes within a second)
    async with Worker(client, task_queue="q", workflows=[Guarded], activities=[hold]):
        handles = [await client.start_workflow(Guarded, "ruled", 0.3, id=f"r-{i}", task_queue="q") for i in range(8)]
        await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 120)
        assert most_at_once(executions["ruled"]) == 2
        (shown,) = [lim for lim in await asyncio.to_thread(read_limits, kafka_config) if lim["key"] == "queue=q/hold"]
        assert (shown["max"], shown["granted"], shown["in_use"]) == (2, 8, 0)
        await client.set_queue_limit("q", 50)  # a rate only: the concurrency rule is replaced, gone
        processors.stop()  # a processor started after the change has certainly read it
        processors.start()
        executions.clear()
        handles = [await client.start_workflow(Guarded, "free", 0.5, id=f"f-{i}", task_queue="q") for i in range(6)]
        await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 120)
    assert most_at_once(executions["free"]) > 2


async def test_an_operator_raises_and_lifts_a_keys_max_from_the_cli(client, processors, kafka_config):
    """Three runs of a max-1 key on a queue no worker serves: one holds, two wait; ``kadence
    limits set --max 3`` admits both at once and the record says who and why; ``kadence limits
    lift`` gives the requests' max back (it applies from the next request)."""
    processors.start("p0")
    for i in range(3):
        await client.start_workflow(
            Guarded, "ops", 0, id=f"ops-{i}", task_queue="nobody", concurrency=[Limit("ops", "k", max=1)]
        )

    async def shown() -> dict:
        rows = await asyncio.to_thread(read_limits, kafka_config, ["ops=k"])
        return rows[0] if rows else {}

    await wait_until(lambda: _shown_is(shown, in_use=1, waiting=2), 60, "one holder and two waiters")
    code, out, err = await kadence(kafka_config, "limits", "set", "ops=k", "--max", "3", "--reason", "incident 7")
    assert code == 0, err
    assert "set to 3" in out
    await wait_until(lambda: _shown_is(shown, in_use=3, waiting=0), 60, "the raised max to admit both waiters")
    override = (await shown())["override"]
    assert (override["max"], override["by"], override["reason"]) == (3, "cli", "incident 7")
    code, out, err = await kadence(kafka_config, "limits", "describe", "ops=k")
    assert code == 0 and "max 3 set by cli" in out, out
    code, out, err = await kadence(kafka_config, "limits", "lift", "ops=k")
    assert code == 0, err
    assert (await shown())["override"] is None
    code, _out, err = await kadence(kafka_config, "limits", "set", "ops=k", "--max", "0")
    assert code == 2 and "--max" in err


async def _shown_is(shown, **expected) -> bool:
    row = await shown()
    return all(row.get(k) == v for k, v in expected.items())
