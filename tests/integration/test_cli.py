"""The operator CLI against the real broker: start, signal, query, describe, cancel, terminate, history."""

import json

from kadence import Worker
from tests.support.cli import kadence

from .conftest import wait_until
from .workflows import Collector


async def test_cli_drives_a_workflow(client, processors, kafka_config):
    processors.start()
    async with Worker(client, task_queue="q", workflows=[Collector]):
        rc, out, err = await kadence(
            kafka_config, "start", "Collector", "--id", "cli-1", "--task-queue", "q", "--input", "[2]"
        )
        assert rc == 0, err
        run_id = json.loads(out)["run_id"]
        rc, out, err = await kadence(kafka_config, "signal", "cli-1", "add", "--input", '["a"]', "--request-id", "r1")
        assert rc == 0, err

        async def one_item():
            rc, out, _ = await kadence(kafka_config, "query", "cli-1", "count")
            return rc == 0 and json.loads(out) == 1

        await wait_until(one_item, 60, "the signal to be seen by the query")
        rc, out, err = await kadence(kafka_config, "describe", "cli-1")
        assert rc == 0 and json.loads(out)["status"] == "running" and json.loads(out)["run_id"] == run_id
        rc, out, err = await kadence(kafka_config, "terminate", "cli-1", "--reason", "done testing")
        assert rc == 0, err
        rc, out, err = await kadence(kafka_config, "describe", "cli-1")
        assert json.loads(out)["status"] == "terminated"
        rc, out, err = await kadence(kafka_config, "cancel", "cli-1")
        assert rc == 1 and "rejected" in err and "Traceback" not in err
        rc, out, err = await kadence(kafka_config, "history", "cli-1")
        kinds = [e["type"] for e in json.loads(out)]
        assert kinds[-1] == "WorkflowExecutionTerminated" and "WorkflowSignaled" in kinds
        rc, out, err = await kadence(kafka_config, "signal", "missing-wf", "add")
        assert rc == 1 and "no open run" in err
        rc, out, err = await kadence(kafka_config, "signal", "cli-1", "add", "--input", "{bad")
        assert rc == 2 and "not JSON" in err


async def test_cli_starts_with_a_priority(client, processors, kafka_config):
    """``--priority``/``--fairness-key``/``--fairness-weight``: describe shows them; a bad one is
    a usage error (out of range) or a typed error (a control character), and starts nothing."""
    processors.start()
    rc, out, err = await kadence(
        kafka_config,
        "start",
        "Collector",
        "--id",
        "cli-prio",
        "--task-queue",
        "nobody",
        "--priority",
        "1",
        "--fairness-key",
        "acme",
        "--fairness-weight",
        "2.5",
    )
    assert rc == 0, err
    rc, out, err = await kadence(kafka_config, "describe", "cli-prio")
    assert json.loads(out)["priority"] == {"priority_key": 1, "fairness_key": "acme", "fairness_weight": 2.5}
    rc, out, err = await kadence(
        kafka_config, "start", "Collector", "--id", "cli-p2", "--task-queue", "q", "--priority", "9"
    )
    assert rc == 2 and "--priority" in err
    rc, out, err = await kadence(
        kafka_config, "start", "Collector", "--id", "cli-p2", "--task-queue", "q", "--fairness-key", "a\x1bb"
    )
    assert rc == 1 and "fairness_key" in err and "Traceback" not in err
    rc, out, err = await kadence(kafka_config, "describe", "cli-p2")
    assert rc != 0
