"""What waits on a task queue (issue 46, the backlog half of item 1): activity tasks no worker
takes are counted with the age of the oldest, by `kadence queues` and the processor's gauges,
and the count falls to zero once a worker has run them."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

from prometheus_client import CollectorRegistry

from kadence import Worker, activity, workflow
from kadence.processors.builds import BacklogReporter
from kadence.topics.backlog import BacklogProbe
from tests.support.cli import kadence

from .conftest import wait_until


@activity.defn
async def later(n: int) -> int:
    return n + 1


@workflow.defn
class Elsewhere:
    @workflow.run
    async def run(self, n: int) -> int:
        # on a queue no worker serves yet: the task waits on that queue's topic
        return await workflow.execute_activity(later, n, task_queue="far", start_to_close_timeout=timedelta(seconds=30))


def _gauges(config) -> dict[str, float]:
    registry = CollectorRegistry()
    reporter = BacklogReporter(config, registry, 60)
    probe = BacklogProbe(config)
    try:
        reporter.refresh(probe)
    finally:
        probe.close()
    labels = {"namespace": config.namespace, "task_queue": "far"}
    return {
        "backlog": registry.get_sample_value("kadence_queue_activity_backlog", labels),
        "age": registry.get_sample_value("kadence_queue_activity_oldest_task_age_seconds", labels),
    }


async def test_activity_tasks_waiting_on_a_queue_are_counted_with_their_age_until_a_worker_runs_them(
    client, processors, kafka_config
):
    processors.start()
    async with Worker(client, task_queue="q", workflows=[Elsewhere]):
        handles = [await client.start_workflow(Elsewhere, i, id=f"far-{i}", task_queue="q") for i in range(5)]

        async def five_waiting():
            rc, out, _err = await kadence(kafka_config, "queues", "describe", "far", "-o", "json")
            doc = json.loads(out) if rc == 0 else None
            return doc is not None and doc["items"][0]["activity_backlog"] == 5 and doc

        doc = await wait_until(five_waiting, 60, "five activity tasks waiting on queue far")
        await asyncio.sleep(1.2)
        rc, out, err = await kadence(kafka_config, "queues", "describe", "far", "-o", "json")
        assert rc == 0, err
        (row,) = json.loads(out)["items"]
        assert row["activity_backlog"] == 5 and row["activity_oldest_age_s"] >= 1.0
        gauges = await asyncio.get_running_loop().run_in_executor(None, _gauges, kafka_config)
        assert gauges["backlog"] == 5 and gauges["age"] >= 1.0
        # every queue in one list: q's workflow tasks were all taken
        rc, out, err = await kadence(kafka_config, "queues", "list", "-o", "json")
        listed = {r["task_queue"]: r for r in json.loads(out)["items"]}
        assert listed["q"]["workflow_backlog"] == 0 and listed["far"]["activity_backlog"] == 5
        async with Worker(client, task_queue="far", activities=[later]):
            assert [await h.result(timeout=60) for h in handles] == [1, 2, 3, 4, 5]

            async def none_waiting():
                rc, out, _err = await kadence(kafka_config, "queues", "describe", "far", "-o", "json")
                return rc == 0 and json.loads(out)["items"][0]["activity_backlog"] == 0

            await wait_until(none_waiting, 60, "the backlog of queue far to drain")
    # the queue's workflow tasks (none: no workflow runs on far), unversioned
    assert [(b["build_id"], b["backlog"]) for b in doc["builds"]] == [(None, 0)]
    rc, _out, err = await kadence(kafka_config, "queues", "describe", "nowhere")
    assert rc == 1 and "no task queue 'nowhere'" in err


async def test_rate_limits_are_set_shown_and_lifted_from_the_cli_and_bad_input_changes_nothing(kafka_config):
    rc, out, err = await kadence(
        kafka_config, "queues", "set-limit", "far", "-r", "20", "-t", "charge=5", "--reason", "stripe asked"
    )
    assert rc == 0, err
    assert "rate limit 20/s, charge=5/s" in out
    rc, out, err = await kadence(kafka_config, "queues", "describe", "far", "-o", "json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["items"][0]["rate_limit"] == "20/s, charge=5/s"
    assert doc["limits"]["activity_types"] == {"charge": 5.0} and doc["limits"]["reason"] == "stripe asked"
    assert doc["limits"]["identity"] == "cli"
    rc, out, _err = await kadence(kafka_config, "queues", "describe", "far")
    assert "rate limit: 20/s, charge=5/s (set by cli: stripe asked)" in out
    for args in (["-r", "0"], ["-r", "nan"], ["-t", "charge"], ["-t", "charge=x"], [], ["-r", "2e6"]):
        rc, _out, err = await kadence(kafka_config, "queues", "set-limit", "far", *args)
        assert rc == 2, (args, err)
    rc, _out, err = await kadence(kafka_config, "queues", "set-limit", "bad queue!", "-r", "1")
    assert rc == 2 and "task_queue" in err
    rc, out, _err = await kadence(kafka_config, "queues", "list", "-o", "json")
    assert {r["task_queue"]: r["rate_limit"] for r in json.loads(out)["items"]} == {"far": "20/s, charge=5/s"}
    rc, out, err = await kadence(kafka_config, "queues", "lift-limit", "far", "--reason", "done")
    assert rc == 0 and "rate limit lifted" in out, err
    rc, out, _err = await kadence(kafka_config, "queues", "list", "-o", "json")
    assert json.loads(out)["items"] == []
