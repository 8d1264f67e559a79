"""The Redis projections (visibility, history read model) on the real broker and Redis: list and
count filters against the ground truth of the history topic, rebuild (with reads during it, and
after the keys were deleted), and a projection process SIGKILLed during a load."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import redis.asyncio as aioredis

from kadence import Client, Worker, WorkflowCanceledError, WorkflowFailureError
from kadence.connectors.rebuild import rebuild_projections
from kadence.readmodels.visibility import VisibilityFilter, VisibilityReader, projection_lag
from kadence.topics import Catalogue, KafkaConfig
from kadence.topics.search_attributes import from_json, index_terms, json_terms

from .conftest import ProcessorProcs, wait_until
from .projection_support import (
    ProjectionProcs,
    ground_truth,
    list_all,
    mismatches,
    redis_url,
    snapshot,
    wait_history_quiet,
)
from .workflows import VisQuick, VisTagger, VisWaiter

#: workflows of the mixed load (2,000 until session 17: 66 s of `make test`; 600 still pages every
#: listing several times at page size 137 and covers every status)
N = 600
QUEUE = "vis"
SINCE = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def projection(kafka_config, tmp_path, request):
    procs = ProjectionProcs(kafka_config, tmp_path)
    yield procs
    procs.close()
    if request.node.rep_call.failed if hasattr(request.node, "rep_call") else False:
        print(procs.logs())


@pytest.fixture
async def redis():
    client = aioredis.from_url(redis_url())
    yield client
    await client.aclose()


async def _bounded(coros, limit: int = 100):
    sem = asyncio.Semaphore(limit)

    async def one(c):
        async with sem:
            return await c

    return await asyncio.gather(*(one(c) for c in coros))


def _plan(i: int) -> tuple:
    """Workflow i of the mixed load: (type, args, what the test does to it)."""
    if i < N * 2 // 5:
        return VisQuick, (i % 4 == 0,), "result"  # a quarter fail, the rest complete
    if i < N * 3 // 4:
        return VisWaiter, (), ("terminate", "cancel", "leave")[i % 3]
    return VisTagger, (i % 5 == 0,), "result"  # a fifth continue as new once


async def _caught_up(reader: VisibilityReader, runs: dict) -> bool:
    return (await reader.count())["total"] == len(runs) and not mismatches(
        runs, {(r["workflow_id"], r["run_id"]): r for r in await list_all(reader, page_size=1000)}
    )


def _cli(config, *args) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "KADENCE_KAFKA_BOOTSTRAP": config.bootstrap,
        "KADENCE_NAMESPACE": config.namespace,
        "KADENCE_REDIS_URL": redis_url(),
    }
    return subprocess.run(
        [sys.executable, "-m", "kadence.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )


async def test_visibility_matches_history_then_rebuilds_identically(
    client, processors, projection, kafka_config, redis
):
    processors.start()
    projection.start()
    async with Worker(client, task_queue=QUEUE, workflows=[VisQuick, VisWaiter, VisTagger]):
        plans = [_plan(i) for i in range(N)]
        handles = await _bounded(
            client.start_workflow(
                wf,
                *args,
                id=f"vis-{i}",
                task_queue=QUEUE,
                search_attributes={
                    "tier": "gold" if i % 3 == 0 else "silver",
                    # typed values: indexed by their terms, shown in their JSON form
                    "rank": i % 4,
                    "regions": ["eu", "us"] if i % 2 else ["eu"],
                    "since": SINCE + timedelta(days=i % 2),
                },
            )
            for i, (wf, args, _) in enumerate(plans)
        )

        async def finish(h, action):
            if action == "terminate":
                await h.terminate(reason="test")
            elif action == "cancel":
                await h.cancel(reason="test")
                with pytest.raises(WorkflowCanceledError):
                    await h.result(timeout=90)
            elif action == "result":
                try:
                    await h.result(timeout=90)
                except WorkflowFailureError:
                    pass

        await _bounded(finish(h, action) for h, (_, _, action) in zip(handles, plans, strict=False))
    wait_history_quiet(kafka_config)
    runs, events = ground_truth(kafka_config)
    statuses = {r["status"] for r in runs.values()}
    assert statuses == {"completed", "failed", "terminated", "canceled", "running", "continued_as_new"}
    assert len(runs) == N + sum(1 for i in range(N * 3 // 4, N) if i % 5 == 0)

    reader = VisibilityReader(redis, kafka_config.namespace)
    await wait_until(lambda: _caught_up(reader, runs), 120, "the projection to match the history topic", 1.0)

    # list and count filters against the ground truth
    starts = sorted(r["start_time_ms"] for r in runs.values())
    closes = sorted(r["close_time_ms"] for r in runs.values() if r["close_time_ms"])
    lo, hi = starts[len(starts) // 3], starts[2 * len(starts) // 3]
    clo, chi = closes[len(closes) // 4], closes[len(closes) // 2]
    cases = [{}]
    cases += [{"workflow_type": t} for t in ("VisQuick", "VisWaiter", "VisTagger", "Nope")]
    cases += [{"status": s} for s in statuses]
    cases += [{"workflow_type": "VisWaiter", "status": "canceled"}, {"workflow_type": "VisQuick", "status": "failed"}]
    cases += [
        {"search": {"tier": "gold"}},
        {"search": {"stage": "done"}},
        {"search": {"tier": "gold", "stage": "tagged"}, "status": "continued_as_new"},
        {"search": {"regions": "us"}},
        {"search": {"regions": ["eu", "us"], "rank": 3}},
        {"search": {"rank": 2.0, "tier": "gold"}},
        {"search": {"since": SINCE + timedelta(days=1)}},
        {"search": {"since": {"datetime": "2026-12-01T00:00:00Z"}, "regions": "eu"}},
    ]
    cases += [
        {"start_from_ms": lo, "start_to_ms": hi},
        {"start_from_ms": lo, "workflow_type": "VisTagger"},
        {"close_from_ms": clo, "close_to_ms": chi},
        {"close_to_ms": chi, "status": "failed"},
    ]

    def want(f: dict) -> set:
        out = set()
        for key, r in runs.items():
            if f.get("workflow_type") not in (None, r["workflow_type"]) or f.get("status") not in (None, r["status"]):
                continue
            wanted = from_json(f.get("search") or {})
            have = r["search_attributes"]
            if any(k not in have or not set(index_terms(v)) <= set(json_terms(have[k])) for k, v in wanted.items()):
                continue
            s, c = r["start_time_ms"], r["close_time_ms"]
            if (f.get("start_from_ms") is not None and s < f["start_from_ms"]) or (
                f.get("start_to_ms") is not None and s > f["start_to_ms"]
            ):
                continue
            if ("close_from_ms" in f or "close_to_ms" in f) and (
                c is None or c < f.get("close_from_ms", 0) or c > f.get("close_to_ms", 10**15)
            ):
                continue
            out.add(key)
        return out

    for f in cases:
        expected = want(f)
        got = await list_all(reader, page_size=137, **f)
        keys = [(r["workflow_id"], r["run_id"]) for r in got]
        assert len(keys) == len(set(keys)), f"duplicates in list({f})"
        assert set(keys) == expected, f"list({f}): {len(keys)} vs {len(expected)}"
        order = [(r["start_time_ms"]) for r in got]
        assert order == sorted(order, reverse=True), f"list({f}) not newest first"
        counted = await reader.count(VisibilityFilter(**f))
        assert counted["total"] == len(expected), f"count({f})"
        by_status: dict = {}
        for key in expected:
            by_status[runs[key]["status"]] = by_status.get(runs[key]["status"], 0) + 1
        assert counted["by_status"] == by_status, f"count({f}) by status"

    # describe shows the latest run; continued-as-new runs link to their successor
    tagger = next(k for k, r in runs.items() if r["status"] == "continued_as_new")
    latest = await reader.describe(tagger[0])
    assert latest["run_id"] != tagger[1] and latest["continued_from_run_id"] == tagger[1]
    i = int(tagger[0].split("-")[1])
    assert latest["status"] == "completed" and latest["search_attributes"] == {
        "tier": "gold" if i % 3 == 0 else "silver",
        "stage": "done",
        "rank": i % 4,
        "regions": ["eu", "us"] if i % 2 else ["eu"],
        "since": {"datetime": f"2026-12-0{1 + i % 2}T00:00:00Z"},
    }
    old = await reader.describe(tagger[0], tagger[1])
    assert old["new_run_id"] == latest["run_id"]

    # the history read model holds every run's events, in order
    snap = await snapshot(redis, kafka_config.namespace)
    assert snap["history"] == {k: events[k] for k in runs}

    # CLI: filters, paging, JSON, counts, lag
    out = _cli(kafka_config, "list", "--type", "VisQuick", "--status", "failed", "--all", "--json", "--page-size", "37")
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    assert {(r["workflow_id"], r["run_id"]) for r in listed["items"]} == want(
        {"workflow_type": "VisQuick", "status": "failed"}
    ) and listed["next_cursor"] is None
    out = _cli(kafka_config, "list", "--search", "tier=gold", "--page-size", "10", "--json")
    page1 = json.loads(out.stdout)
    out = _cli(
        kafka_config, "list", "--search", "tier=gold", "--page-size", "10", "--json", "--cursor", page1["next_cursor"]
    )
    page2 = json.loads(out.stdout)
    first20 = [(r["workflow_id"], r["run_id"]) for r in await list_all(reader, page_size=20, search={"tier": "gold"})][
        :20
    ]
    assert [(r["workflow_id"], r["run_id"]) for r in page1["items"] + page2["items"]] == first20
    out = _cli(kafka_config, "list", "--status", "running", "--count", "--json")
    assert json.loads(out.stdout)["total"] == len(want({"status": "running"}))
    await wait_until(lambda: _lag_zero(redis, kafka_config.namespace), 30, "the reported lag to reach 0", 0.5)
    out = _cli(kafka_config, "projections", "lag", "--json")
    lag = json.loads(out.stdout)
    assert lag["running"] is True and lag["events"] == 0 and lag["seconds"] == 0

    # rebuild while the live projection runs: reads never see a partial projection
    before = await snapshot(redis, kafka_config.namespace)
    seen: list = []
    done = asyncio.Event()

    async def keep_reading():
        while not done.is_set():
            seen.append((await reader.count())["total"])
            await asyncio.sleep(0.01)

    readers = asyncio.create_task(keep_reading())
    report = await rebuild_projections(kafka_config, redis, grace_s=0.5)
    done.set()
    await readers
    assert report.generations["visibility"][0] == "0" and report.events >= sum(len(e) for e in events.values())
    assert seen and set(seen) == {len(runs)}, "a read during the rebuild saw a partial projection"
    assert await snapshot(redis, kafka_config.namespace) == before
    assert not [k async for k in redis.scan_iter(match=f"kadence:{kafka_config.namespace}:*:g0:*")]

    # the keys deleted (Redis "flushed"), then rebuilt with the CLI: identical, record for record
    async for key in redis.scan_iter(match=f"kadence:{kafka_config.namespace}:*"):
        await redis.unlink(key)
    assert (await reader.count())["total"] == 0
    out = _cli(kafka_config, "projections", "rebuild", "--quiet")
    assert out.returncode == 0, out.stderr
    assert await snapshot(redis, kafka_config.namespace) == before


async def _lag_zero(redis, namespace: str) -> bool:
    lag = await projection_lag(redis, namespace)
    return lag["running"] and lag["events"] == 0


async def test_projection_killed_during_a_load_misses_and_duplicates_nothing(
    client, processors, projection, kafka_config, redis
):
    processors.start()
    projection.start()
    reader = VisibilityReader(redis, kafka_config.namespace)
    n = 600
    async with Worker(client, task_queue=QUEUE, workflows=[VisQuick, VisTagger]):

        async def wave(lo, hi):
            hs = await _bounded(
                client.start_workflow(VisTagger if i % 2 else VisQuick, i % 10 == 0, id=f"kill-{i}", task_queue=QUEUE)
                for i in range(lo, hi)
            )
            return hs

        handles = await wave(0, 200)
        await wait_until(lambda: _count_positive(reader), 60, "the projection to apply something")
        projection.kill()  # mid-load: some batches written, offsets not committed
        handles += await wave(200, 400)
        projection.start()
        handles += await wave(400, n)
        await asyncio.sleep(0)  # let the restarted process join while workflows run
        await wait_until(lambda: _count_positive(reader), 60, "the projection to apply something")
        projection.kill()
        projection.start()

        async def settle(h):
            try:
                await h.result(timeout=90)
            except WorkflowFailureError:
                pass

        await _bounded(settle(h) for h in handles)
    wait_history_quiet(kafka_config)
    runs, events = ground_truth(kafka_config)
    await wait_until(lambda: _caught_up(reader, runs), 120, "the projection to match the history topic", 1.0)
    ns = kafka_config.namespace
    gen = "0"
    assert await redis.zcard(f"kadence:{ns}:visibility:g{gen}:i:all") == len(runs)
    counts = await redis.hgetall(f"kadence:{ns}:visibility:g{gen}:counts")
    assert sum(int(v) for v in counts.values()) == len(runs)
    for key, evs in events.items():
        assert await redis.llen(f"kadence:{ns}:history:g{gen}:ev:{key[0]}/{key[1]}") == len(evs)
    snap = await snapshot(redis, ns)
    assert snap["history"] == {k: events[k] for k in runs}


async def _count_positive(reader) -> bool:
    return (await reader.count())["total"] > 0


async def test_a_projection_whose_group_formed_without_the_history_topic_takes_it_when_it_appears(
    kafka_bootstrap, tmp_path, redis
):
    # ``make soak``: after a broker restart the group leader's metadata lacked {ns}.history, the
    # group formed with nothing assigned, and the projection stayed behind until aiokafka's
    # 5-minute metadata refresh. A namespace whose topics do not exist yet forms the group the
    # same way, on purpose.
    config = KafkaConfig(bootstrap=kafka_bootstrap, namespace=f"t{uuid.uuid4().hex[:10]}", partitions=4)
    projection = ProjectionProcs(config, tmp_path)
    processors = ProcessorProcs(config, tmp_path)
    try:
        projection.start()
        log = next(tmp_path.glob("projection-*.log"))
        await wait_until(
            lambda: f"Ignoring missing topic: '{config.namespace}.history'" in log.read_text(),
            90,
            "the projection's group to form without the history topic",
            0.5,
        )
        Catalogue(config).apply()
        processors.start()
        client = await Client.connect(config=config)
        try:
            async with Worker(client, task_queue=QUEUE, workflows=[VisQuick]):
                handles = [
                    await client.start_workflow(VisQuick, False, id=f"late-{i}", task_queue=QUEUE) for i in range(8)
                ]
                for h in handles:
                    await h.result(timeout=60)
        finally:
            await client.close()
        wait_history_quiet(config)
        runs, _events = ground_truth(config)
        assert len(runs) == 8
        reader = VisibilityReader(redis, config.namespace)
        # within two metadata refreshes (10 s each) and a rejoin
        await wait_until(lambda: _caught_up(reader, runs), 45, "the projection to take the history topic", 0.5)
        assert projection.procs["v0"].poll() is None
    except BaseException:
        print(projection.logs())
        raise
    finally:
        projection.close()
        processors.close()


async def test_a_projection_restarted_after_its_group_formed_without_the_history_topic_takes_it(
    kafka_bootstrap, tmp_path, redis
):
    # chaos seed 136010807: the group formed without the history topic during a broker restart,
    # the projection was killed before its metadata refresh, and each restarted instance took
    # over the (empty) assignment as the same static member, without a rebalance: the visibility
    # projection stayed empty for good.
    config = KafkaConfig(bootstrap=kafka_bootstrap, namespace=f"t{uuid.uuid4().hex[:10]}", partitions=4)
    projection = ProjectionProcs(config, tmp_path)
    processors = ProcessorProcs(config, tmp_path)
    try:
        projection.start()
        first = next(tmp_path.glob("projection-v0-1.log"))
        await wait_until(
            lambda: f"Ignoring missing topic: '{config.namespace}.history'" in first.read_text(),
            90,
            "the projection's group to form without the history topic",
            0.5,
        )
        projection.kill()  # before its next metadata refresh
        projection.start()
        second = next(tmp_path.glob("projection-v0-2.log"))
        await wait_until(lambda: "Joined group" in second.read_text(), 90, "the restarted projection to join", 0.5)
        Catalogue(config).apply()
        processors.start()
        client = await Client.connect(config=config)
        try:
            async with Worker(client, task_queue=QUEUE, workflows=[VisQuick]):
                for i in range(8):
                    handle = await client.start_workflow(VisQuick, False, id=f"restarted-{i}", task_queue=QUEUE)
                    await handle.result(timeout=60)
        finally:
            await client.close()
        wait_history_quiet(config)
        runs, _events = ground_truth(config)
        reader = VisibilityReader(redis, config.namespace)
        # the old member's session (10 s here), a rebalance, a metadata refresh (10 s) and a rejoin
        await wait_until(
            lambda: _caught_up(reader, runs), 60, "the restarted projection to take the history topic", 0.5
        )
    except BaseException:
        print(projection.logs())
        raise
    finally:
        projection.close()
        processors.close()
